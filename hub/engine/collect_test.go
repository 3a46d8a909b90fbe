package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/rollout"
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
		{"seen before, agent heard quietProof after the arrival, no results", aggregate.Results{Observed: at(-time.Minute), Unlisted: 1}, arrived.Add(unpacedQuietProof), true},
		{"seen before, agent heard long after, but older results are there", aggregate.Results{Observed: at(-time.Minute), OldestResult: at(-time.Hour)}, arrived.Add(time.Hour), false},
		{"seen after, a policy without results, agent heard quietProof after", aggregate.Results{Observed: at(5 * time.Second), Unlisted: 1}, arrived.Add(unpacedQuietProof), true},
	} {
		if got := freshReport(tc.res, tc.heard, arrived, true, unpacedQuietProof); got != tc.want {
			t.Errorf("%s: fresh %v, want %v", tc.name, got, tc.want)
		}
	}
	// After a hub restart the arrival is the moment the wave was seen synced, and the results
	// Kyverno made before it are of what the cluster held all along.
	older := aggregate.Results{Observed: at(5 * time.Second), OldestResult: at(-time.Hour)}
	if !freshReport(older, time.Time{}, arrived, false, unpacedQuietProof) || freshReport(older, time.Time{}, arrived, true, unpacedQuietProof) {
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
			if got := freshReport(res, time.Time{}, arrived, true, unpacedQuietProof); got != tc.want {
				t.Errorf("clock %v off, %s: fresh %v, want %v", skew, tc.name, got, tc.want)
			}
		}
	}
	// Not seen by the hub yet: whatever its clock says, not fresh.
	unseen := summary(time.Hour, after, after)
	unseen.Generation++
	if freshReport(aggregate.ForPolicies(unseen, policies, arrived.Add(time.Minute)), arrived.Add(time.Hour), arrived, true, unpacedQuietProof) {
		t.Error("a generation the hub has not seen counted as fresh")
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
	if want := wrote.Add(unpacedQuietProof).Sub(now) + time.Second; recheck != want {
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

// A wave judged on fresh reports stays judged while its agent's next summary waits for the hub
// to observe it (moments): the flicker to "waiting for reports" seen in the rollout e2e. The
// judgement holds only for the arrival it was made for, read back from the status as stored
// (microseconds), and never for a new version.
func TestGateReportsKeepAFreshJudgementWhileANewSummaryIsUnobserved(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	wrote := now.Add(-20*time.Second + 123*time.Nanosecond) // not whole microseconds
	policy := []aggregate.Policy{{Kind: "ClusterPolicy", Name: "p"}}
	spec := policyhubv1.PolicyReportSummarySpec{Cluster: "c", Policies: []policyhubv1.PolicySummary{{Name: "p", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 2}}}}
	plan := &rollout.Plan{Waves: []rollout.Wave{{Name: "canary", Clusters: []string{"c"}}}, Modes: map[string]policyhubv1.Mode{"c": policyhubv1.ModeAudit}}
	owned := map[string][]aggregate.Policy{"c": policy}
	judge := func(s *policyhubv1.PolicyReportSummary, before policyhubv1.ClusterStatus, wroteAt time.Time) policyhubv1.ClusterStatus {
		t.Helper()
		got, _ := gateReports(plan, []Outcome{{Cluster: "c", WroteAt: wroteAt}}, []policyhubv1.ClusterStatus{before},
			SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{"c": s}}, owned, now)
		return got[0]
	}
	first := judge(seenSummary(now.Add(-5*time.Second), spec), policyhubv1.ClusterStatus{Name: "c"}, wrote)
	if first.ReportsFresh == nil || !*first.ReportsFresh || first.ReportsFreshFor == nil {
		t.Fatalf("a summary seen after the version arrived: fresh %v for %v; want true, for its arrival", first.ReportsFresh, first.ReportsFreshFor)
	}
	// As a slice stores it and the next reconcile reads it back.
	raw, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	var stored policyhubv1.ClusterStatus
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	unobserved := seenSummary(now.Add(-5*time.Second), spec)
	unobserved.Generation++ // pushed again; the summary controller has not recorded when yet
	if got := judge(unobserved, stored, wrote); got.ReportsFresh == nil || !*got.ReportsFresh {
		t.Errorf("an unobserved newer summary undid the fresh judgement: %v", got.ReportsFresh)
	}
	if got := judge(unobserved, policyhubv1.ClusterStatus{Name: "c"}, wrote); got.ReportsFresh == nil || *got.ReportsFresh {
		t.Errorf("with no judgement before, an unobserved summary is not fresh: %v", got.ReportsFresh)
	}
	if got := judge(unobserved, stored, now.Add(-time.Second)); got.ReportsFresh == nil || *got.ReportsFresh || got.ReportsFreshFor != nil {
		t.Errorf("a new version arrived: the old judgement must not stand (fresh %v for %v)", got.ReportsFresh, got.ReportsFreshFor)
	}
	notFresh := stored
	f := false
	notFresh.ReportsFresh = &f
	if got := judge(unobserved, notFresh, wrote); *got.ReportsFresh {
		t.Error("a judgement of not fresh was turned fresh by an unobserved summary")
	}
}

// unpacedQuietProof is quietProof of an agent the hub does not pace (it pushes within 10 s).
var unpacedQuietProof = quietProof(nil)

// A paced agent may hold a change for its push interval: the hub must hear it that long (and
// Kyverno's grace) after a version arrived before its unchanged summary counts as the report of
// that version; an unpaced one, 10 s.
func TestQuietProofCoversThePublishedPushInterval(t *testing.T) {
	paced := &policyhubv1.PolicyReportSummary{}
	if got, want := quietProof(paced), reportGrace+15*time.Second; got != want {
		t.Errorf("unpaced: %s, want %s", got, want)
	}
	paced.Status.Pacing = &policyhubv1.SummaryPacing{PushInterval: metav1.Duration{Duration: 160 * time.Second}}
	if got, want := quietProof(paced), reportGrace+165*time.Second; got != want {
		t.Errorf("paced at 160s: %s, want %s", got, want)
	}
	paced.Status.Pacing.PushInterval.Duration = 100 * time.Hour // the hub's own, but bounded all the same
	if got, want := quietProof(paced), reportGrace+aggregate.MaxHeartbeat+5*time.Second; got != want {
		t.Errorf("paced beyond the cap: %s, want %s", got, want)
	}
	arrived := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	res := aggregate.Results{Observed: arrived.Add(-time.Minute)}
	heard := arrived.Add(time.Minute) // a renewal a minute after the version arrived, nothing pushed
	if !freshReport(res, heard, arrived, false, unpacedQuietProof) {
		t.Error("an unpaced agent heard a minute after the arrival with nothing new: not fresh")
	}
	paced.Status.Pacing.PushInterval.Duration = 160 * time.Second
	if freshReport(res, heard, arrived, false, quietProof(paced)) {
		t.Error("an agent paced at 160s, heard a minute after: fresh, though it may still hold a change")
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
