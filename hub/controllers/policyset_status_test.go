package controllers

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/work"
)

// A set's members that fail or conflict are named once each, with the clusters they do so in,
// failures first and most clusters first, bounded; pending clusters say nothing yet.
func TestMemberAttention(t *testing.T) {
	problem := func(action, name, msg string) policyhubv1.PlannedChange {
		return policyhubv1.PlannedChange{Action: action, APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: name, Message: msg}
	}
	outcome := func(cluster string, pending bool, problems ...policyhubv1.PlannedChange) engine.Outcome {
		return engine.Outcome{Cluster: cluster, Pending: pending, Result: &work.DeclarationResult{Problems: problems}}
	}
	got, failed, conflict := memberAttention([]engine.Outcome{
		outcome("a", false, problem("Failed", "bad", "admission webhook denied: rule r: invalid pattern"), problem("Conflict", "taken", "owned by another")),
		outcome("b", false, problem("Failed", "bad", "admission webhook denied"), problem("Failed", "other", "refused")),
		outcome("c", true, problem("Failed", "pending-only", "not counted")),
	})
	if failed != 2 || conflict != 1 || len(got) != 3 {
		t.Fatalf("failed %d conflict %d attention %v: want 2, 1 and 3 entries", failed, conflict, got)
	}
	if got[0].Name != "bad" || got[0].Clusters != 2 || got[0].Cluster != "a" || got[0].Message != "admission webhook denied: rule r: invalid pattern" ||
		got[1].Name != "other" || got[2].Name != "taken" || got[2].Action != "Conflict" {
		t.Fatalf("attention %+v", got)
	}

	var many []engine.Outcome
	for i := range policyhubv1.MaxAttentionMembers + 7 {
		many = append(many, outcome(fmt.Sprint("c", i), false, problem("Failed", fmt.Sprint("m", i), "x")))
	}
	got, failed, _ = memberAttention(many)
	if len(got) != policyhubv1.MaxAttentionMembers || failed != int32(policyhubv1.MaxAttentionMembers+7) {
		t.Fatalf("%d named, %d counted", len(got), failed)
	}
	if got, failed, conflict := memberAttention([]engine.Outcome{outcome("a", false)}); got != nil || failed != 0 || conflict != 0 {
		t.Fatalf("no problem: %v %d %d", got, failed, conflict)
	}
}

// A set's members with fail or error results are named by their violations across the clusters
// that own them, most first, each with its worst cluster; a summary's entry for a policy another
// declaration owns there counts for nothing, and a negative count (a hostile summary) as 0. A
// cluster another replica works counts as its owner wrote it in its state.
func TestMemberViolations(t *testing.T) {
	summary := func(cluster string, policies ...policyhubv1.PolicySummary) *policyhubv1.PolicyReportSummary {
		s := &policyhubv1.PolicyReportSummary{}
		s.Namespace, s.Spec.Cluster, s.Spec.Policies = cluster, cluster, policies
		return s
	}
	entry := func(name string, fail, errs int64) policyhubv1.PolicySummary {
		return policyhubv1.PolicySummary{Name: name, Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: fail, Error: errs}}
	}
	member := func(name string) aggregate.Policy { return aggregate.Policy{Kind: "ClusterPolicy", Name: name} }
	read := engine.SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{
		"a": summary("a", entry("team", 3, 1), entry("tier", 0, 0), entry("not-ours", 50, 0)),
		"b": summary("b", entry("team", 1, 0), entry("tier", 7, 0), entry("labels", -5, 0)),
		"d": summary("d", entry("team", 1000, 0)), // another replica's cluster: not read here
	}, Unread: map[string]bool{"d": true}}
	owned := map[string][]aggregate.Policy{
		"a": {member("team"), member("tier")},
		"b": {member("team"), member("tier"), member("labels")},
		"c": {member("team")}, // no summary yet
		"d": {member("team")},
	}
	theirs := policyhubv1.MemberViolations{MemberRef: policyhubv1.MemberRef{Kind: "ClusterPolicy", Name: "team"}, Violations: 3}
	clusters := []policyhubv1.ClusterStatus{{Name: "a"}, {Name: "b"}, {Name: "c", Violating: []policyhubv1.MemberViolations{theirs}}, {Name: "d", Violating: []policyhubv1.MemberViolations{theirs}}}
	clusters = (&policySet{PolicySet: &policyhubv1.PolicySet{}}).SetResults(clusters, read, owned, time.Now())
	if clusters[2].Violating != nil {
		t.Errorf("a cluster without a summary keeps %+v", clusters[2].Violating)
	}
	got := memberViolations(clusters)
	if len(got) != 2 {
		t.Fatalf("violating %+v: want team and tier", got)
	}
	if got[0].Name != "team" || got[0].Violations != 8 || got[0].Clusters != 3 || got[0].Cluster != "a" || got[0].Action != "Violating" ||
		got[1].Name != "tier" || got[1].Violations != 7 || got[1].Clusters != 1 || got[1].Cluster != "b" {
		t.Errorf("violating %+v", got)
	}

	var many []policyhubv1.PolicySummary
	var members []aggregate.Policy
	for i := range maxEntryViolating + 5 {
		many = append(many, entry(fmt.Sprint("m", i), int64(i+1), 0))
		members = append(members, member(fmt.Sprint("m", i)))
	}
	kept := violatingMembers(summary("e", many...), members)
	if len(kept) != maxEntryViolating || kept[0].Violations != int64(maxEntryViolating+5) {
		t.Errorf("a cluster's violating members: %d kept, first %+v; want the %d with most", len(kept), kept[0], maxEntryViolating)
	}
}

// A set whose source cannot be read is not Ready though its clusters hold the version kept: the
// holding says the source fails and names the version the clusters keep; a rollout's own holding
// follows it, and a stalled rollout keeps its reason. A source read, or never read, holds nothing.
func TestPolicySetSourceHolding(t *testing.T) {
	set := func(status metav1.ConditionStatus, digest string) *policyhubv1.PolicySet {
		ps := &policyhubv1.PolicySet{}
		ps.Status.Conditions = []metav1.Condition{{Type: ConditionSourceReady, Status: status, Reason: "ReadFailed",
			Message: "registry unreachable; the clusters keep version sha256:aaa (reg/p:stable)"}}
		if digest != "" {
			ps.Status.Source = &policyhubv1.SourceStatus{Digest: digest, Revision: "reg/p:stable"}
		}
		return ps
	}
	if got := sourceHolding(set(metav1.ConditionTrue, "sha256:aaa")); got != "" {
		t.Errorf("source read: holding %q", got)
	}
	if got := sourceHolding(set(metav1.ConditionFalse, "")); got != "" {
		t.Errorf("no version ever read (recordRead's Ready says so): holding %q", got)
	}
	d := &policySet{PolicySet: set(metav1.ConditionFalse, "sha256:aaa")}
	p := d.Progress(&engine.Rendering{}, nil, nil, time.Now())
	if p.Reason != ReasonSourceNotReady || p.Stalled || !strings.Contains(p.Holding, "the source cannot be read: registry unreachable") ||
		!strings.Contains(p.Holding, "the clusters keep version sha256:aaa (reg/p:stable)") {
		t.Errorf("progress %+v: want SourceNotReady naming the failure and the version kept", p)
	}
}

// A set's members counted by engine: by their kind's group, engines in a fixed order, none
// listed with no member.
func TestMembersByEngine(t *testing.T) {
	member := func(apiVersion string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		return u
	}
	for _, tc := range []struct {
		name    string
		members []*unstructured.Unstructured
		want    []policyhubv1.EngineCount
	}{
		{"none", nil, nil},
		{"Kyverno only", []*unstructured.Unstructured{member("kyverno.io/v1"), member("policies.kyverno.io/v1")},
			[]policyhubv1.EngineCount{{Engine: policyhubv1.EngineKyverno, Count: 2}}},
		{"three engines", []*unstructured.Unstructured{member("constraints.gatekeeper.sh/v1beta1"), member("templates.gatekeeper.sh/v1"),
			member("admissionregistration.k8s.io/v1"), member("kyverno.io/v1")},
			[]policyhubv1.EngineCount{{Engine: policyhubv1.EngineKyverno, Count: 1}, {Engine: policyhubv1.EngineKubernetes, Count: 1}, {Engine: policyhubv1.EngineGatekeeper, Count: 2}}},
		{"no engine's group", []*unstructured.Unstructured{member("v1"), member("apps/v1")}, nil},
	} {
		if got := membersByEngine(tc.members); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
