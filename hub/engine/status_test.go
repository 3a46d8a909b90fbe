package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
	// Judged stale by the summary controller (its agent's Lease not renewed for three heartbeats):
	// the verdict it writes.
	stale := seenSummary(now.Add(-time.Hour), policyhubv1.PolicyReportSummarySpec{Cluster: "c2", GeneratedAt: &metav1.Time{Time: now}})
	apimeta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: policyhubv1.ReasonStale, ObservedGeneration: stale.Generation})
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
	got := SetClusterResults(clusters, read, owned, now)
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
	clusters = SetClusterResults(clusters, SummaryRead{Summaries: summaries}, owned, now.Time)
	fp.Status.Summary = summarize(clusters)
	SetConditions(&fp.Status.Conditions, readyCondition(clusters, nil, "", 1), nil, nil)
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
