package controllers

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/statusslice"
	"github.com/policyhub/policyhub/hub/work"
)

func TestClusterStatusesMoveLastSyncTimeOnlyOnChange(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(10 * time.Minute))
	synced := &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, Message: "ok", Actions: policyhubv1.ActionCounts{Unchanged: 1}}
	first := clusterStatuses(nil, []Outcome{{Cluster: "b", Result: synced, Wrote: true}, {Cluster: "a", Result: synced}}, nil, t0)
	if len(first) != 2 || first[0].Name != "a" || !first[0].LastSyncTime.Equal(&t0) {
		t.Fatalf("first statuses %+v", first)
	}
	same := clusterStatuses(first, []Outcome{{Cluster: "a", Result: synced}, {Cluster: "b", Result: synced}}, nil, t1)
	for _, s := range same {
		if !s.LastSyncTime.Equal(&t0) {
			t.Errorf("%s: lastSyncTime moved on a resync that changed nothing", s.Name)
		}
	}
	failed := &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseFailed, Message: "boom"}
	changed := clusterStatuses(first, []Outcome{{Cluster: "a", Result: failed}, {Cluster: "b", Result: synced, Wrote: true}}, nil, t1)
	for _, s := range changed {
		if !s.LastSyncTime.Equal(&t1) {
			t.Errorf("%s: lastSyncTime did not move after a change", s.Name)
		}
	}
}

func TestReadyCondition(t *testing.T) {
	tests := []struct {
		name             string
		phases           []policyhubv1.ClusterPhase
		unknown          []string
		missingPlacement string
		wantStatus       metav1.ConditionStatus
		wantReason       string
	}{
		{name: "no clusters", wantStatus: metav1.ConditionTrue, wantReason: "NoClusters"},
		{name: "all synced", phases: []policyhubv1.ClusterPhase{"Synced", "Synced"}, wantStatus: metav1.ConditionTrue, wantReason: "Synced"},
		{name: "dry-run somewhere", phases: []policyhubv1.ClusterPhase{"Synced", "DryRun"}, wantStatus: metav1.ConditionTrue, wantReason: "DryRun"},
		{name: "worst phase is the reason", phases: []policyhubv1.ClusterPhase{"LockHeld", "Failed", "Conflict"}, wantStatus: metav1.ConditionFalse, wantReason: "Failed"},
		{name: "conflict", phases: []policyhubv1.ClusterPhase{"Synced", "Conflict"}, wantStatus: metav1.ConditionFalse, wantReason: "Conflict"},
		{name: "unknown cluster named", phases: []policyhubv1.ClusterPhase{"Synced"}, unknown: []string{"ghost"}, wantStatus: metav1.ConditionFalse, wantReason: "UnknownCluster"},
		{name: "missing OCM Placement, nothing selected", missingPlacement: "spec.placement.placementRef: the OCM Placement ns/p does not exist", wantStatus: metav1.ConditionFalse, wantReason: "PlacementNotFound"},
		{name: "missing OCM Placement first, named clusters synced", phases: []policyhubv1.ClusterPhase{"Synced", "Failed"}, missingPlacement: "x", wantStatus: metav1.ConditionFalse, wantReason: "PlacementNotFound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clusters []policyhubv1.ClusterStatus
			for i, p := range tt.phases {
				clusters = append(clusters, policyhubv1.ClusterStatus{Name: string(rune('a' + i)), Phase: p})
			}
			c := readyCondition(clusters, tt.unknown, tt.missingPlacement, 3)
			if c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 3 {
				t.Errorf("condition %+v, want status %s reason %s", c, tt.wantStatus, tt.wantReason)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	s := summarize([]policyhubv1.ClusterStatus{
		{Name: "a", Phase: "Synced", Results: &policyhubv1.ResultCounts{Pass: 3, Fail: 2}},
		{Name: "b", Phase: "DryRun"},
		{Name: "c", Phase: "Conflict", Message: "not ours", Results: &policyhubv1.ResultCounts{Error: 1}},
		{Name: "d", Phase: "Pending"},
		{Name: "e", Phase: "Synced", Stale: true},
	})
	want := policyhubv1.StatusSummary{Clusters: 5, Synced: 3, Failed: 1, Pending: 1, Stale: 1,
		Results: policyhubv1.ResultCounts{Pass: 3, Fail: 2, Error: 1}, Violations: 3,
		Attention: []policyhubv1.ClusterAttention{{Name: "c", Phase: "Conflict", Message: "not ours"}, {Name: "d", Phase: "Pending"}, {Name: "e", Phase: "Synced", Stale: true}}}
	if !equality.Semantic.DeepEqual(s, want) {
		t.Errorf("summary %+v, want %+v", s, want)
	}
}

// A NotEnforced cluster is unprotected: counted failed and not enforced, never synced, and it
// needs attention before an Unsupported one.
func TestSummarizeNotEnforced(t *testing.T) {
	s := summarize([]policyhubv1.ClusterStatus{
		{Name: "a", Phase: policyhubv1.ClusterPhaseSynced},
		{Name: "b", Phase: policyhubv1.ClusterPhaseUnsupported},
		{Name: "c", Phase: policyhubv1.ClusterPhaseNotEnforced, Message: "not enforced in cluster c"},
	})
	want := policyhubv1.StatusSummary{Clusters: 3, Synced: 1, Failed: 2, NotEnforced: 1,
		Attention: []policyhubv1.ClusterAttention{{Name: "c", Phase: policyhubv1.ClusterPhaseNotEnforced, Message: "not enforced in cluster c"}, {Name: "b", Phase: policyhubv1.ClusterPhaseUnsupported}}}
	if !equality.Semantic.DeepEqual(s, want) {
		t.Errorf("summary %+v, want %+v", s, want)
	}
}

// A cluster's largest counts saturate the totals instead of wrapping them negative: the CRD
// refuses a negative total, and the declaration's whole status would go unwritten.
func TestSummarizeSaturates(t *testing.T) {
	s := summarize([]policyhubv1.ClusterStatus{
		{Phase: "Synced", Results: &policyhubv1.ResultCounts{Fail: math.MaxInt64, Error: math.MaxInt64}},
		{Phase: "Synced", Results: &policyhubv1.ResultCounts{Fail: 5}},
	})
	if s.Results.Fail != math.MaxInt64 || s.Results.Error != math.MaxInt64 || s.Violations != math.MaxInt64 {
		t.Errorf("summary %+v, want the largest counts", s)
	}
}

func TestSetResults(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// Seen a minute ago; its cluster's clock runs an hour ahead, which changes nothing.
	fresh := seenSummary(now.Add(-time.Minute), policyhubv1.PolicyReportSummarySpec{
		Cluster: "c1", GeneratedAt: &metav1.Time{Time: now.Add(time.Hour)},
		Policies: []policyhubv1.PolicySummary{
			{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 2, Fail: 1}, Blocked: 3},
			{Name: "someone-elses", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 50}},
		},
	})
	// Judged stale by the summary controller (its agent's Lease not renewed for three heartbeats).
	stale := seenSummary(now.Add(-time.Hour), policyhubv1.PolicyReportSummarySpec{Cluster: "c2", GeneratedAt: &metav1.Time{Time: now}})
	judgeSummary(stale, time.Time{}, now)
	owned := map[string][]aggregate.Policy{
		"c1": {{Kind: "ClusterPolicy", Name: "require-labels"}},
		"c2": {{Kind: "ClusterPolicy", Name: "require-labels"}},
		"c3": {{Kind: "ClusterPolicy", Name: "require-labels"}},
	}
	clusters := []policyhubv1.ClusterStatus{
		{Name: "c1"}, {Name: "c2"},
		// c3 had results once; its summary is gone: they must not linger.
		{Name: "c3", Results: &policyhubv1.ResultCounts{Fail: 9}, Blocked: 1, ReportTime: &metav1.Time{Time: now}},
		// c4's summary could not be read just now: what is known stays.
		{Name: "c4", Results: &policyhubv1.ResultCounts{Fail: 4}, Blocked: 2, ReportTime: &metav1.Time{Time: now}},
	}
	read := SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{"c1": fresh, "c2": stale}, Unread: map[string]bool{"c4": true}}
	got := SetResults(clusters, read, owned, now)
	if r := got[0].Results; r == nil || *r != (policyhubv1.ResultCounts{Pass: 2, Fail: 1}) || got[0].Blocked != 3 || got[0].Stale ||
		got[0].ReportTime == nil || !got[0].ReportTime.Equal(&metav1.Time{Time: now.Add(-time.Minute)}) {
		t.Errorf("c1 (report time: when the hub saw it): %+v", got[0])
	}
	if r := got[1].Results; r == nil || *r != (policyhubv1.ResultCounts{}) || !got[1].Stale {
		t.Errorf("c2 (stale summary, no results of ours): %+v", got[1])
	}
	if got[2].Results != nil || got[2].Blocked != 0 || got[2].ReportTime != nil {
		t.Errorf("c3 (no summary) kept old results: %+v", got[2])
	}
	if got[3].Results == nil || got[3].Results.Fail != 4 || got[3].Blocked != 2 {
		t.Errorf("c4 (summary unread) lost its results: %+v", got[3])
	}
	if s := summarize(got); s.Results.Fail != 5 || s.Violations != 5 {
		t.Errorf("summary %+v", s)
	}
}

func TestApplicationResults(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	summaries := map[string]*policyhubv1.PolicyReportSummary{
		"c1": seenSummary(now, policyhubv1.PolicyReportSummarySpec{
			Cluster: "c1",
			Policies: []policyhubv1.PolicySummary{
				{Name: "shop-limits", Namespace: "shop", Kind: "Policy", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}, Blocked: 2,
					LastBlocked: &policyhubv1.BlockedAdmission{Message: "Deployment shop/web: [need-team] fail (blocked); team label"}},
			},
			Applications: []policyhubv1.ApplicationSummary{
				{Namespace: "shop", Name: "shop", Policy: "shop/shop-limits", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
				// Listed twice (an older CRD let it through): counted once.
				{Namespace: "shop", Name: "shop", Policy: "shop/shop-limits", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
				// Another application's results of a policy of the same name elsewhere: not ours.
				{Namespace: "shop", Name: "blog", Policy: "shop/shop-limits", Results: policyhubv1.ResultCounts{Fail: 9}},
				{Namespace: "shop", Name: "shop", Policy: "other", Results: policyhubv1.ResultCounts{Fail: 5}},
			},
			Violations: []policyhubv1.Violation{
				{Policy: "shop/shop-limits", Rule: "need-team", Result: "fail", Severity: "low", Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "api"}},
				{Policy: "other", Result: "fail", Severity: "critical"},
				{Policy: "shop/shop-limits", Rule: "need-team", Result: "fail", Severity: "high", Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}},
			},
		}),
	}
	owned := map[string][]aggregate.Policy{"c1": {{Kind: "Policy", Namespace: "shop", Name: "shop-limits"}}, "c2": {{Kind: "Policy", Namespace: "shop", Name: "shop-limits"}}}
	// c3 is another replica's: its state counts as its owner wrote it, its summary is not read.
	summaries["c3"] = seenSummary(now, policyhubv1.PolicyReportSummarySpec{Cluster: "c3", Violations: []policyhubv1.Violation{{Policy: "shop/shop-limits", Result: "fail", Severity: "critical"}}})
	owned["c3"] = owned["c1"]
	theirs := policyhubv1.Violation{Cluster: "c3", Policy: "shop/shop-limits", Result: "error", Severity: "medium", Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "db"}}
	clusters := []policyhubv1.ClusterStatus{{Name: "c1"}, {Name: "c2", Violations: []policyhubv1.Violation{theirs}}, {Name: "c3",
		ApplicationResults: []policyhubv1.ApplicationPolicyResult{{Cluster: "c3", Policy: "shop-limits", Results: policyhubv1.ResultCounts{Error: 1}}},
		Violations:         []policyhubv1.Violation{theirs}}}
	results, top := applicationResults("shop", clusters, SummaryRead{Summaries: summaries, Unread: map[string]bool{"c3": true}}, owned, now)
	if len(results) != 2 || results[0].Cluster != "c1" || results[0].Results != (policyhubv1.ResultCounts{Pass: 1, Fail: 2}) || results[0].Blocked != 2 ||
		results[0].LastBlocked == nil || results[0].LastBlocked.Message == "" || results[1].Cluster != "c3" || results[1].Results.Error != 1 {
		t.Errorf("results %+v", results)
	}
	if len(top) != 3 || top[0].Resource.Name != "web" || top[1].Resource.Name != "db" || top[2].Resource.Name != "api" || top[0].Cluster != "c1" || top[1].Cluster != "c3" {
		t.Errorf("top violations (only the application's policies, most severe first; c3's as its owner wrote them): %+v", top)
	}
	if len(clusters[0].ApplicationResults) != 1 || len(clusters[0].Violations) != 2 || clusters[1].Violations != nil {
		t.Errorf("each cluster this replica works keeps its own part for the status's writer: %+v", clusters[:2])
	}
	if r := clusters[0].Results; r == nil || r.Fail != 2 || clusters[0].Blocked != 2 {
		t.Errorf("c1 status %+v", clusters[0])
	}
	if clusters[1].Results != nil {
		t.Errorf("c2 has no summary, so no results: %+v", clusters[1])
	}
}

// A declaration placed on ten thousand clusters keeps its status under 32 KiB, whatever state
// its clusters are in: counts, conditions, and the worst clusters by name, the rest counted;
// every cluster's state is in slices of at most a hundred clusters, each far under etcd's
// 1.5 MiB request limit.
func TestStatusOfTenThousandClustersIsBounded(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	var outcomes []Outcome
	summaries := map[string]*policyhubv1.PolicyReportSummary{}
	owned := map[string][]aggregate.Policy{}
	const n = 10000
	for i := range n {
		name := fmt.Sprintf("prod-eu-west-%05d", i)
		phase, message := policyhubv1.ClusterPhaseSynced, "created 1, updated 0, deleted 0, unchanged 0"
		if i%10 == 0 { // a tenth dark: their reason is kept
			phase, message = policyhubv1.ClusterPhaseFailed, name+": unreachable: no answer within 5s "+strings.Repeat("and more ", 200)
		}
		result := &work.DeclarationResult{Phase: phase, Message: message, Actions: policyhubv1.ActionCounts{Created: 1}}
		if phase == policyhubv1.ClusterPhaseSynced {
			result.InForce = ptr.To(i%7 != 0) // some not confirmed by Kyverno yet
		}
		outcomes = append(outcomes, Outcome{Cluster: name, Wrote: true, Result: result})
		summaries[name] = seenSummary(now.Time, policyhubv1.PolicyReportSummarySpec{Cluster: name, GeneratedAt: &now,
			Policies: []policyhubv1.PolicySummary{{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 120, Fail: 3}}}})
		owned[name] = []aggregate.Policy{{Kind: "ClusterPolicy", Name: "require-labels"}}
	}
	fp := &policyhubv1.FleetPolicy{}
	clusters := clusterStatuses(nil, outcomes, nil, now)
	clusters = SetResults(clusters, SummaryRead{Summaries: summaries}, owned, now.Time)
	fp.Status.Summary = summarize(clusters)
	setConditions(&fp.Status.Conditions, readyCondition(clusters, nil, "", 1), nil, nil)
	raw, err := json.Marshal(fp.Status)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 32 << 10
	t.Logf("status of %d clusters: %d bytes", n, len(raw))
	if len(raw) > limit {
		t.Errorf("status of %d clusters is %d bytes, want at most %d", n, len(raw), limit)
	}
	sum := fp.Status.Summary
	if sum.Clusters != n || sum.Failed != n/10 || len(sum.Attention) != policyhubv1.MaxAttention || sum.AttentionOmitted != n/10-policyhubv1.MaxAttention {
		t.Errorf("summary: %d clusters, %d failed, %d named for attention and %d omitted; want %d, %d, %d and %d",
			sum.Clusters, sum.Failed, len(sum.Attention), sum.AttentionOmitted, n, n/10, policyhubv1.MaxAttention, n/10-policyhubv1.MaxAttention)
	}

	changes := statusslice.Split(statusslice.Owner{Kind: "FleetPolicy", Name: "many", UID: "u", Namespace: "hub"}, clusters, nil, 0)
	if len(changes.Write) != n/policyhubv1.MaxClustersPerSlice {
		t.Errorf("%d slices, want %d", len(changes.Write), n/policyhubv1.MaxClustersPerSlice)
	}
	largest := 0
	for _, slice := range changes.Write {
		raw, err := json.Marshal(slice)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(raw))
	}
	t.Logf("largest slice: %d bytes", largest)
	if largest > 256<<10 {
		t.Errorf("largest slice is %d bytes, want at most 256 KiB", largest)
	}
	if clusters[0].Message == "" || clusters[1].Message != "" {
		t.Errorf("messages: failed %q (want the reason), synced %q (want none: the counts say it)", clusters[0].Message, clusters[1].Message)
	}
}

// seenSummary is a summary the hub saw at hub time seen.
func seenSummary(seen time.Time, spec policyhubv1.PolicyReportSummarySpec) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{Spec: spec}
	s.Namespace, s.Name = spec.Cluster, policyhubv1.SummaryName
	s.Generation, s.Status.ObservedGeneration = 3, 3
	s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
	return s
}

// One cluster cannot push the others out of an ApplicationPolicy's top violations: fifty
// critical violations dated in the future from one cluster leave the other cluster's one low
// violation in the list, and a time later than now ranks as now.
func TestTopViolationsAreFairAcrossClusters(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	owned := map[string][]aggregate.Policy{}
	summaries := map[string]*policyhubv1.PolicyReportSummary{}
	var hostile []policyhubv1.Violation
	for i := range 50 {
		hostile = append(hostile, policyhubv1.Violation{Policy: "shop/limits", Result: "fail", Severity: "critical",
			Resource:  policyhubv1.ResourceRef{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("fake-%02d", i)},
			Timestamp: &metav1.Time{Time: now.Add(time.Duration(i+1) * time.Hour)}})
	}
	normal := []policyhubv1.Violation{{Policy: "shop/limits", Result: "fail", Severity: "low",
		Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}, Timestamp: &metav1.Time{Time: now.Add(-time.Hour)}}}
	for name, violations := range map[string][]policyhubv1.Violation{"a-hostile": hostile, "b-normal": normal} {
		owned[name] = []aggregate.Policy{{Kind: "Policy", Namespace: "shop", Name: "limits"}}
		summaries[name] = seenSummary(now, policyhubv1.PolicyReportSummarySpec{Cluster: name, Violations: violations})
	}
	clusters := []policyhubv1.ClusterStatus{{Name: "a-hostile"}, {Name: "b-normal"}}
	_, top := applicationResults("shop", clusters, SummaryRead{Summaries: summaries}, owned, now)
	if len(top) != maxTopViolations {
		t.Fatalf("%d top violations, want %d", len(top), maxTopViolations)
	}
	if last := top[len(top)-1]; last.Cluster != "b-normal" || last.Resource.Name != "web" {
		t.Errorf("the normal cluster's violation was pushed out (or not ranked last, least severe): last is %+v", last)
	}
	// The hostile cluster's future times rank as now: its own order is kept by turn (fake-00 first).
	if top[0].Resource.Name != "fake-00" || top[1].Resource.Name != "fake-01" {
		t.Errorf("first %s, %s; want fake-00, fake-01 (equal times now, in the cluster's own order)", top[0].Resource.Name, top[1].Resource.Name)
	}
}

func TestTopViolations(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	v := func(cluster, name, severity string, age time.Duration) policyhubv1.Violation {
		return policyhubv1.Violation{Cluster: cluster, Severity: severity, Resource: policyhubv1.ResourceRef{Name: name}, Timestamp: &metav1.Time{Time: now.Add(-age)}}
	}
	names := func(vs []policyhubv1.Violation) string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Cluster+"/"+v.Resource.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name      string
		byCluster [][]policyhubv1.Violation
		n         int
		want      string
	}{
		{"nothing", nil, 3, ""},
		{"one cluster: most severe, then newest", [][]policyhubv1.Violation{{v("a", "old", "high", 2*time.Hour), v("a", "low", "low", 0), v("a", "new", "high", time.Hour)}}, 3, "a/new,a/old,a/low"},
		{
			"turns: each cluster's best first, then ranked",
			[][]policyhubv1.Violation{
				{v("a", "a1", "critical", 0), v("a", "a2", "critical", 0), v("a", "a3", "critical", 0)},
				{v("b", "b1", "medium", 0), v("b", "b2", "medium", 0)},
				{v("c", "c1", "", 0)},
			},
			4, "a/a1,a/a2,b/b1,c/c1",
		},
		{"a future time ranks as now", [][]policyhubv1.Violation{{v("a", "future", "high", -time.Hour), v("a", "now", "high", 0)}}, 2, "a/future,a/now"},
		{"no time ranks last among equals", [][]policyhubv1.Violation{{{Cluster: "a", Severity: "high"}, v("a", "dated", "high", time.Hour)}}, 2, "a/dated,a/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(topViolations(tc.byCluster, tc.n, now)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// A status whose pass, warn or skip counts alone moved is not written (they move with every
// agent's summary); a moved fail count, or anything else, is.
func TestStatusChurnIsNotAChange(t *testing.T) {
	fp := func(pass, fail int64) Declaration {
		d := &fleetPolicy{FleetPolicy: &policyhubv1.FleetPolicy{}}
		d.Status.Summary = policyhubv1.StatusSummary{Clusters: 2, Results: policyhubv1.ResultCounts{Pass: pass, Skip: pass, Warn: pass, Fail: fail}}
		return d
	}
	ap := func(pass, fail int64) Declaration {
		d := &applicationPolicy{ApplicationPolicy: &policyhubv1.ApplicationPolicy{}}
		d.Status.Policies = []policyhubv1.ApplicationPolicyResult{{Cluster: "c1", Policy: "p", Results: policyhubv1.ResultCounts{Pass: pass, Fail: fail}}}
		return d
	}
	for _, kind := range []struct {
		name string
		make func(pass, fail int64) Declaration
	}{{"FleetPolicy", fp}, {"ApplicationPolicy", ap}} {
		same := equality.Semantic.DeepEqual(kind.make(1, 3).StatusWithoutChurn(), kind.make(9, 3).StatusWithoutChurn())
		moved := equality.Semantic.DeepEqual(kind.make(1, 3).StatusWithoutChurn(), kind.make(1, 4).StatusWithoutChurn())
		if !same || moved {
			t.Errorf("%s: pass moved counts as a change: %v; fail moved counts as none: %v", kind.name, !same, moved)
		}
	}
}

// A cluster that refuses the declaration for its tenant's budget stalls it, saying so; it is not
// a failure retried (no Reconciling), unlike a cluster that failed.
func TestOverBudgetStalls(t *testing.T) {
	refusal := "tenant team-a would hold 4 objects in c1, over its budget of 3 (--max-objects-per-tenant-per-cluster): this declaration, which renders 1 of them, is not synced there, and what it held there is removed"
	if !work.OverBudget(true, refusal) {
		t.Fatalf("the refusal's format changed: %q", refusal)
	}
	failed := policyhubv1.ClusterPhaseFailed
	unreachable := "c3: unreachable: connection refused"
	clusters := []policyhubv1.ClusterStatus{
		{Name: "c1", Phase: failed, Message: refusal},
		{Name: "c2", Phase: failed, Message: strings.Replace(refusal, "c1", "c2", 1)},
		{Name: "c3", Phase: failed, Message: unreachable},
		{Name: "c4", Phase: policyhubv1.ClusterPhaseSynced, Message: refusal},
	}
	stalled := overBudget(clusters)
	if stalled == nil || stalled.Reason != ReasonOverBudget || stalled.Message != "refused in 2 clusters; "+refusal {
		t.Errorf("Stalled = %+v, want OverBudget naming the first refusal and the count", stalled)
	}
	if overBudget(clusters[2:]) != nil {
		t.Error("Stalled without a refusal")
	}
	outcome := func(cluster, message string) Outcome {
		return Outcome{Cluster: cluster, Result: &work.DeclarationResult{Phase: failed, Message: message}}
	}
	targets := &render.Targets{Objects: map[string][]*unstructured.Unstructured{"c1": {{}}, "c3": {{}}}}
	if _, failing, _ := keepOutcomes([]Outcome{outcome("c1", refusal)}, targets); failing {
		t.Error("a refusal counted as failing (retried)")
	}
	if _, failing, _ := keepOutcomes([]Outcome{outcome("c1", refusal), outcome("c3", unreachable)}, targets); !failing {
		t.Error("an unreachable cluster not counted as failing")
	}
}
