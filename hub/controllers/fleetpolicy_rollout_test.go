package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/rollout"
	"github.com/policyhub/policyhub/hub/work"
)

// A wave is judged only on what Kyverno reported of the version that arrived: a summary the
// hub saw after it, every result made after it, and a policy without results only once Kyverno
// has had time to report it.
func TestFreshReport(t *testing.T) {
	arrived := time.Date(2026, 11, 24, 10, 0, 0, 500_000_000, time.UTC) // 10:00:00.5
	at := func(d time.Duration) time.Time { return arrived.Truncate(time.Second).Add(d) }
	for _, tc := range []struct {
		name  string
		res   aggregate.Results
		heard time.Time // the agent last heard (its Lease renewed); zero: only the summary
		want  bool
	}{
		{"not seen by the hub", aggregate.Results{ReportTime: &metav1.Time{Time: at(5 * time.Second)}}, time.Time{}, false},
		{"seen before the version arrived", aggregate.Results{Observed: at(0), OldestResult: at(0)}, time.Time{}, false},
		{"an older result is still there", aggregate.Results{Observed: at(5 * time.Second), OldestResult: at(-time.Second)}, time.Time{}, false},
		{"every result made since (the same second counts)", aggregate.Results{Observed: at(5 * time.Second), OldestResult: at(0)}, time.Time{}, true},
		{"results without times", aggregate.Results{Observed: at(5 * time.Second)}, time.Time{}, true},
		{"a policy without results, too soon", aggregate.Results{Observed: at(5 * time.Second), Unlisted: 1}, time.Time{}, false},
		{"a policy without results, after the grace", aggregate.Results{Observed: at(reportGrace + time.Second), Unlisted: 1}, time.Time{}, true},
		// A quiet agent renews its Lease and pushes nothing: heard long enough after the
		// arrival, its unchanged summary is its report of the version, but never one whose
		// results Kyverno made before the version arrived.
		{"seen before, agent heard just after the arrival", aggregate.Results{Observed: at(-time.Minute), Unlisted: 1}, at(5 * time.Second), false},
		{"seen before, agent heard quietProof after the arrival, no results", aggregate.Results{Observed: at(-time.Minute), Unlisted: 1}, arrived.Add(quietProof), true},
		{"seen before, agent heard long after, but older results are there", aggregate.Results{Observed: at(-time.Minute), OldestResult: at(-time.Hour)}, arrived.Add(time.Hour), false},
		{"seen after, a policy without results, agent heard quietProof after", aggregate.Results{Observed: at(5 * time.Second), Unlisted: 1}, arrived.Add(quietProof), true},
	} {
		if got := freshReport(tc.res, tc.heard, arrived, true); got != tc.want {
			t.Errorf("%s: fresh %v, want %v", tc.name, got, tc.want)
		}
	}
	// After a hub restart the arrival is the moment the wave was seen synced, and the results
	// Kyverno made before it are of what the cluster held all along.
	older := aggregate.Results{Observed: at(5 * time.Second), OldestResult: at(-time.Hour)}
	if !freshReport(older, time.Time{}, arrived, false) || freshReport(older, time.Time{}, arrived, true) {
		t.Error("older results count only when the arrival is not known to be a write")
	}
}

// A cluster's clock an hour ahead or behind never makes old reports count as fresh, nor fresh
// ones as old: freshness is judged by when the hub saw the summary, and Kyverno's result times
// are translated by the clock offset the hub measured then.
func TestFreshReportWithClusterClockSkew(t *testing.T) {
	arrived := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC) // by the hub's clock
	policies := []aggregate.Policy{{Kind: "ClusterPolicy", Name: "require-labels"}}
	// summary is what the hub holds: seen at hub time seen, generated then by a clock skew
	// ahead of the hub's, with results Kyverno made at hub time result.
	summary := func(skew time.Duration, seen, result time.Time) *policyhubv1.PolicyReportSummary {
		s := &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{
			GeneratedAt: &metav1.Time{Time: seen.Add(skew)},
			Policies: []policyhubv1.PolicySummary{{Name: "require-labels", Kind: "ClusterPolicy",
				Results: policyhubv1.ResultCounts{Fail: 1}, OldestResult: &metav1.Time{Time: result.Add(skew).Truncate(time.Second)}}},
		}}
		s.Generation, s.Status.ObservedGeneration = 7, 7
		s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
		return s
	}
	before, after := arrived.Add(-10*time.Minute), arrived.Add(10*time.Second)
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		for _, tc := range []struct {
			name         string
			seen, result time.Time
			want         bool
		}{
			{"seen before the version arrived", before, before, false},
			{"seen after, with results made before it", after, before, false},
			{"seen after, with results made after it", after, arrived.Add(2 * time.Second), true},
		} {
			now := arrived.Add(time.Minute)
			res := aggregate.ForPolicies(summary(skew, tc.seen, tc.result), policies, now)
			if got := freshReport(res, time.Time{}, arrived, true); got != tc.want {
				t.Errorf("clock %v off, %s: fresh %v, want %v", skew, tc.name, got, tc.want)
			}
		}
	}
	// Not seen by the hub yet: whatever its clock says, not fresh.
	unseen := summary(time.Hour, after, after)
	unseen.Generation++
	if freshReport(aggregate.ForPolicies(unseen, policies, arrived.Add(time.Minute)), arrived.Add(time.Hour), arrived, true) {
		t.Error("a generation the hub has not seen counted as fresh")
	}
}

// Every phase change is an Event, a held gate a Warning; a new version says it started.
func TestRolloutTransitions(t *testing.T) {
	waves := []rollout.Wave{{Name: "staging", Gate: rollout.Gate{MaxFail: 0}}, {Name: "prod"}}
	prev := &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{{Name: "staging", Phase: policyhubv1.WaveAuditing}, {Name: "prod", Phase: policyhubv1.WavePending}}}
	next := &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{
		{Name: "staging", Phase: policyhubv1.WaveWaiting, Clusters: 1, Fail: 2, Reason: "2 fail results, at most 0 allowed"},
		{Name: "prod", Phase: policyhubv1.WavePending},
	}}
	events := rolloutTransitions(prev, next, waves)
	if len(events) != 1 || events[0].eventType != corev1.EventTypeWarning || events[0].reason != "WaveWaiting" ||
		events[0].message != "wave staging: Auditing -> Waiting (1 clusters): 2 fail results, at most 0 allowed" {
		t.Fatalf("events %+v", events)
	}
	if got := rolloutTransitions(next, next, waves); len(got) != 0 {
		t.Errorf("nothing changed, events %+v", got)
	}
	started := rolloutTransitions(prev, &policyhubv1.RolloutStatus{Revision: "r2", Waves: []policyhubv1.WaveStatus{{Name: "staging", Phase: policyhubv1.WaveAuditing}}}, waves)
	if len(started) != 2 || started[0].reason != "RolloutStarted" || !strings.Contains(started[0].message, "revision r2 (was r1)") || started[1].reason != "WaveAuditing" {
		t.Errorf("a new revision: events %+v", started)
	}
}

// Each replica judges the reports of the clusters it works that roll out the version (fresh:
// seen after its worker wrote it; not yet: a recheck when the agent may prove it), clears the
// judgement where no rollout or wave runs, and keeps another replica's as its owner wrote it,
// which is what the gates count.
func TestGateReports(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	wrote := now.Add(-20 * time.Second)
	policy := []aggregate.Policy{{Kind: "ClusterPolicy", Name: "p"}}
	spec := func(cluster string) policyhubv1.PolicyReportSummarySpec {
		return policyhubv1.PolicyReportSummarySpec{Cluster: cluster, Policies: []policyhubv1.PolicySummary{{Name: "p", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 2}}}}
	}
	read := SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{
		"after":  seenSummary(now.Add(-10*time.Second), spec("after")),
		"before": seenSummary(wrote.Add(-time.Minute), spec("before")),
		"held":   seenSummary(now, spec("held")),
	}, Unread: map[string]bool{"theirs": true}}
	owned := map[string][]aggregate.Policy{"after": policy, "before": policy, "held": policy, "theirs": policy}
	plan := &rollout.Plan{Revision: "r2", Waves: []rollout.Wave{{Name: "canary", Clusters: []string{"after", "before", "theirs"}}},
		Modes: map[string]policyhubv1.Mode{"after": policyhubv1.ModeAudit, "before": policyhubv1.ModeAudit, "theirs": policyhubv1.ModeAudit}}
	own := []Outcome{
		{Cluster: "after", WroteAt: wrote}, {Cluster: "before", WroteAt: wrote}, {Cluster: "held", WroteAt: wrote},
	}
	theirs := true
	clusters := []policyhubv1.ClusterStatus{{Name: "after"}, {Name: "before"}, {Name: "held", ReportsFresh: &theirs}, {Name: "theirs", ReportsFresh: &theirs}}
	got, recheck := gateReports(plan, own, clusters, read, owned, now)
	fresh := func(i int) string {
		if got[i].ReportsFresh == nil {
			return "unjudged"
		}
		return fmt.Sprint(*got[i].ReportsFresh)
	}
	if fresh(0) != "true" || fresh(1) != "false" || fresh(2) != "unjudged" || fresh(3) != "true" {
		t.Errorf("fresh: after %s, before %s, held %s, theirs %s; want true, false, unjudged, true (its owner's)", fresh(0), fresh(1), fresh(2), fresh(3))
	}
	if want := wrote.Add(quietProof).Sub(now) + time.Second; recheck != want {
		t.Errorf("recheck in %v, want %v (when a renewal would be late enough to count)", recheck, want)
	}
	plan.States = []rollout.WaveState{{Name: "canary", Phase: rollout.Done}}
	if _, recheck := gateReports(plan, own, clusters, read, owned, now); recheck != 0 {
		t.Errorf("a wave done rechecks nothing: %v", recheck)
	}
	got, _ = gateReports(nil, own, clusters, read, owned, now)
	if fresh(0) != "unjudged" || fresh(3) != "true" {
		t.Errorf("without a rollout: after %s, theirs %s; want unjudged, and the owner's", fresh(0), fresh(3))
	}
}

// An agent late for its renewal is looked at again no sooner than its next one could come: a
// recheck already due would otherwise spin.
func TestGateReportsOfALateAgent(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s := seenSummary(now.Add(-time.Hour), policyhubv1.PolicyReportSummarySpec{Cluster: "late"})
	plan := &rollout.Plan{Waves: []rollout.Wave{{Name: "canary", Clusters: []string{"late"}}}, Modes: map[string]policyhubv1.Mode{"late": policyhubv1.ModeAudit}}
	_, recheck := gateReports(plan, []Outcome{{Cluster: "late", WroteAt: now.Add(-10 * time.Minute)}}, []policyhubv1.ClusterStatus{{Name: "late"}},
		SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{"late": s}}, nil, now)
	if want := aggregate.Heartbeat(s) + time.Second; recheck != want {
		t.Errorf("recheck in %v, want %v", recheck, want)
	}
}

// A wave whose cluster is NotEnforced (its Kyverno does not execute the policy's kind) is never
// Done: the cluster is not in force, and the reason names it; a Synced, in-force one completes.
func TestRolloutWaitsForNotEnforcedCluster(t *testing.T) {
	now := time.Unix(1000, 0)
	plan := &rollout.Plan{Revision: "r1",
		Waves:  []rollout.Wave{{Name: "prod", Clusters: []string{"a", "b"}}},
		States: []rollout.WaveState{{Name: "prod", Phase: rollout.Enforcing, Since: now.Add(-time.Minute)}},
		Modes:  map[string]policyhubv1.Mode{"a": policyhubv1.ModeEnforce, "b": policyhubv1.ModeEnforce}}
	inForce := true
	outcomes := []Outcome{
		{Cluster: "a", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}},
		{Cluster: "b", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseNotEnforced, InForce: new(bool)}},
	}
	done := func() *policyhubv1.StableVersion { return &policyhubv1.StableVersion{Revision: "r1"} }
	step := stepRollout(plan, outcomes, nil, nil, now, nil, false, nil, done)
	w := step.status.Waves[0]
	if w.Phase != policyhubv1.WaveEnforcing || !strings.Contains(w.Reason, "b") || strings.Contains(w.Reason, "a,") {
		t.Errorf("wave %s (%q), want Enforcing waiting for b", w.Phase, w.Reason)
	}
	outcomes[1].Result = &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}
	if w := stepRollout(plan, outcomes, nil, nil, now, nil, false, nil, done).status.Waves[0]; w.Phase != policyhubv1.WaveDone {
		t.Errorf("every cluster in force: wave %s (%q), want Done", w.Phase, w.Reason)
	}
}

// With replicas sharing the fleet, the replica writing the status reads only its own clusters'
// summaries: a wave gated on legacy objects judges another replica's cluster by the count its
// owner wrote in the cluster's state (recordLegacy), and holds while that cluster has none.
func TestLegacyGateReadsOtherReplicasClusters(t *testing.T) {
	now := time.Unix(1000, 0)
	zero := int64(0)
	plan := &rollout.Plan{Revision: "r1",
		Waves:  []rollout.Wave{{Name: "canary", Clusters: []string{"mine", "theirs"}, Gate: rollout.Gate{MaxLegacyObjects: &zero}}},
		States: []rollout.WaveState{{Name: "canary", Phase: rollout.Auditing, Since: now.Add(-time.Minute), SyncedAt: ptr.To(now.Add(-time.Minute))}},
		Modes:  map[string]policyhubv1.Mode{"mine": policyhubv1.ModeAudit, "theirs": policyhubv1.ModeAudit}}
	inForce, fresh := true, true
	outcomes := []Outcome{
		{Cluster: "mine", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}},
		{Cluster: "theirs", Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, InForce: &inForce}},
	}
	// The owner of "theirs" wrote its count; "mine" is read here from its summary.
	read := SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{"mine": {}}, Unread: map[string]bool{"theirs": true}}
	two := int64(2)
	clusters := []policyhubv1.ClusterStatus{{Name: "mine", ReportsFresh: &fresh}, {Name: "theirs", ReportsFresh: &fresh, LegacyObjects: &two}}
	legacy := map[string]*int64{"mine": &zero}
	recordLegacy(clusters, read, legacy, true)
	if clusters[0].LegacyObjects == nil || *clusters[0].LegacyObjects != 0 || *clusters[1].LegacyObjects != 2 {
		t.Fatalf("recorded %v and %v, want mine's 0 and theirs kept at 2", clusters[0].LegacyObjects, clusters[1].LegacyObjects)
	}
	done := func() *policyhubv1.StableVersion { return &policyhubv1.StableVersion{Revision: "r1"} }
	w := stepRollout(plan, outcomes, clusters, legacy, now, nil, false, nil, done).status.Waves[0]
	if w.Phase != policyhubv1.WaveWaiting || !strings.Contains(w.Reason, "theirs (2)") || w.LegacyObjects == nil || *w.LegacyObjects != 2 {
		t.Errorf("wave %s (%q, %v), want Waiting on theirs' 2 legacy objects", w.Phase, w.Reason, w.LegacyObjects)
	}
	clusters[1].LegacyObjects = &zero
	if w := stepRollout(plan, outcomes, clusters, legacy, now, nil, false, nil, done).status.Waves[0]; w.Phase == policyhubv1.WaveWaiting {
		t.Errorf("every cluster reports none: wave %s (%q), want it to proceed", w.Phase, w.Reason)
	}
	// A declaration whose rollout has no such gate carries no counts: an inventory's change
	// rewrites none of its slices.
	recordLegacy(clusters, read, legacy, false)
	if clusters[0].LegacyObjects != nil || clusters[1].LegacyObjects != nil {
		t.Errorf("ungated: counts %v, %v kept", clusters[0].LegacyObjects, clusters[1].LegacyObjects)
	}
}
