package rollout

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// run makes the steps in order, each from the previous output, and returns every output.
func run(waves []Wave, steps []Input) []Output {
	var outs []Output
	var prev []WaveState
	for _, in := range steps {
		in.Waves, in.Previous = waves, prev
		out := Next(in)
		outs = append(outs, out)
		prev = out.Waves
	}
	return outs
}

func phases(out Output) []Phase {
	var p []Phase
	for _, w := range out.Waves {
		p = append(p, w.Phase)
	}
	return p
}

func at(d time.Duration) time.Time { return t0.Add(d) }

var (
	audit   = policyhubv1.ModeAudit
	enforce = policyhubv1.ModeEnforce
)

// The scenario: staging holds on its fail count until the violating Deployment is fixed,
// soaks, is promoted to Enforce, and only then does prod get the policy in Audit; prod completes.
func TestTwoWavesGatedOnFailResults(t *testing.T) {
	waves := []Wave{
		{Name: "staging", Clusters: []string{"staging-1"}, Gate: Gate{MaxFail: 0, Soak: time.Minute}},
		{Name: "prod", Clusters: []string{"prod-1"}},
	}
	// m: the cluster holds what its wave wants (synced), its agent reported on it (fresh), fail results.
	m := func(synced, fresh bool, fail int64) Measure {
		return Measure{Synced: synced, Fresh: fresh, Fail: fail}
	}
	s := time.Second
	outs := run(waves, []Input{
		{Now: at(0)}, // staging starts
		{Now: at(5 * s), Measures: map[string]Measure{"staging-1": m(false, false, 0)}},                              // Audit not synced yet
		{Now: at(10 * s), Measures: map[string]Measure{"staging-1": m(true, false, 0)}},                              // synced: reports from now on
		{Now: at(15 * s), Measures: map[string]Measure{"staging-1": m(true, false, 0)}},                              // no report on the current version yet
		{Now: at(20 * s), Measures: map[string]Measure{"staging-1": m(true, true, 2)}},                               // 2 fail: holds
		{Now: at(30 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0)}},                               // fixed: soak starts
		{Now: at(60 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0)}},                               // soaking
		{Now: at(91 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0)}},                               // soaked: Enforce
		{Now: at(95 * s), Measures: map[string]Measure{"staging-1": m(false, true, 0)}},                              // Enforce not synced yet
		{Now: at(100 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0)}},                              // staging done, prod starts
		{Now: at(105 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0), "prod-1": m(true, false, 0)}}, // prod synced in Audit
		{Now: at(110 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0), "prod-1": m(true, true, 0)}},  // prod reported: Enforce
		{Now: at(120 * s), Measures: map[string]Measure{"staging-1": m(true, true, 0), "prod-1": m(true, true, 0)}},  // prod done
	})
	want := [][]Phase{
		{Auditing, Pending},
		{Auditing, Pending},
		{Auditing, Pending},
		{Auditing, Pending},
		{Waiting, Pending},
		{Waiting, Pending},
		{Waiting, Pending},
		{Enforcing, Pending},
		{Enforcing, Pending},
		{Done, Auditing},
		{Done, Auditing},
		{Done, Enforcing}, // prod's gate (no soak, no approval) holds at once
		{Done, Done},
	}
	for i, out := range outs {
		if got := phases(out); !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("step %d: phases %v, want %v (%+v)", i, got, want[i], out.Waves)
		}
	}
	if r := outs[1].Waves[0].Reason; r != "syncing the current version in Audit: waiting for staging-1" {
		t.Errorf("step 1 reason %q", r)
	}
	if w := outs[2].Waves[0]; w.SyncedAt == nil || !w.SyncedAt.Equal(at(10*s)) {
		t.Errorf("step 2: synced at %v, want 10s", w.SyncedAt)
	}
	if r := outs[3].Waves[0].Reason; r != "waiting for reports on the current version from staging-1" {
		t.Errorf("step 3: a report generated before the cluster had the version must not count: reason %q", r)
	}
	if w := outs[4].Waves[0]; w.Fail != 2 || w.Reason != "2 fail results, at most 0 allowed" || w.HoldingSince != nil {
		t.Errorf("step 4: %+v, want the measured fail count as the reason", w)
	}
	if w := outs[6].Waves[0]; w.HoldingSince == nil || !w.HoldingSince.Equal(at(30*s)) || !strings.Contains(w.Reason, "soaking: the gate has held for 30s of 1m0s") {
		t.Errorf("step 6: %+v", w)
	}
	if got := outs[4].Modes; !reflect.DeepEqual(got, map[string]policyhubv1.Mode{"staging-1": audit}) {
		t.Errorf("while staging audits, modes %v: prod must get nothing", got)
	}
	if got := outs[9].Modes; !reflect.DeepEqual(got, map[string]policyhubv1.Mode{"staging-1": enforce, "prod-1": audit}) {
		t.Errorf("once staging is done, modes %v", got)
	}
	if !outs[12].Done || outs[11].Done {
		t.Errorf("done after the last step: %v, before it: %v; want only after", outs[12].Done, outs[11].Done)
	}
	if !outs[9].Waves[0].Since.Equal(at(100 * s)) {
		t.Errorf("staging Done since %v, want the step it became so", outs[9].Waves[0].Since)
	}
	if r := outs[8].Waves[0].Reason; r != "syncing Enforce: waiting for staging-1" {
		t.Errorf("step 8 reason %q", r)
	}
}

// reported gives the waves' states a SyncedAt: their clusters all held the current version at t0.
func reported(states ...WaveState) []WaveState {
	synced := t0
	for i := range states {
		states[i].SyncedAt = &synced
	}
	return states
}

// A break in the gate restarts the soak; blocked admissions are gated too.
func TestGateBreakRestartsTheSoak(t *testing.T) {
	waves := []Wave{{Name: "w", Clusters: []string{"a", "b"}, Gate: Gate{MaxFail: 1, MaxBlocked: 0, Soak: time.Minute}}}
	ok := map[string]Measure{"a": {Synced: true, Fresh: true, Fail: 1}, "b": {Synced: true, Fresh: true}}
	blocked := map[string]Measure{"a": {Synced: true, Fresh: true}, "b": {Synced: true, Fresh: true, Blocked: 3}}
	prev := reported(WaveState{Name: "w", Phase: Auditing, Since: t0})
	var outs []Output
	for _, in := range []Input{
		{Now: at(time.Second), Measures: ok},
		{Now: at(40 * time.Second), Measures: blocked},
		{Now: at(50 * time.Second), Measures: ok},
		{Now: at(100 * time.Second), Measures: ok},
		{Now: at(111 * time.Second), Measures: ok},
	} {
		in.Waves, in.Previous = waves, prev
		out := Next(in)
		outs, prev = append(outs, out), out.Waves
	}
	if r := outs[1].Waves[0].Reason; r != "3 admissions refused (server-side dry-runs not counted), at most 0 allowed" {
		t.Errorf("blocked: reason %q", r)
	}
	if w := outs[3].Waves[0]; w.Phase != Waiting || !w.HoldingSince.Equal(at(50*time.Second)) {
		t.Errorf("after the break: %+v, want soaking since 50s", w)
	}
	if due := NextWake(waves, outs[3].Waves); !due.Equal(at(110 * time.Second)) {
		t.Errorf("next wake %v, want the soak's end at 110s", due)
	}
	if w := outs[4].Waves[0]; w.Phase != Enforcing {
		t.Errorf("soaked a minute since the break: %+v, want Enforcing", w)
	}
	if due := NextWake(waves, outs[4].Waves); !due.IsZero() {
		t.Errorf("next wake %v once promoted, want none", due)
	}
}

// Approval holds a wave whose gate holds; pause holds everything, even an approved wave.
func TestApprovalAndPause(t *testing.T) {
	waves := []Wave{{Name: "prod", Clusters: []string{"p"}, Gate: Gate{Approval: true}}}
	fresh := map[string]Measure{"p": {Synced: true, Fresh: true}}
	prev := reported(WaveState{Name: "prod", Phase: Auditing, Since: t0})
	var outs []Output
	for _, in := range []Input{
		{Now: at(time.Second), Measures: fresh},
		{Now: at(2 * time.Second), Measures: fresh, Approved: map[string]bool{"prod": true}, Paused: true},
		{Now: at(3 * time.Second), Measures: fresh, Approved: map[string]bool{"prod": true}},
	} {
		in.Waves, in.Previous = waves, prev
		out := Next(in)
		outs, prev = append(outs, out), out.Waves
	}
	if w := outs[0].Waves[0]; w.Phase != Waiting || w.Reason != "waiting for approval" {
		t.Errorf("unapproved: %+v", w)
	}
	if w := outs[1].Waves[0]; w.Phase != Waiting {
		t.Errorf("paused: %+v, want it held where it was", w)
	}
	if w := outs[2].Waves[0]; w.Phase != Enforcing {
		t.Errorf("approved and resumed: %+v, want Enforcing", w)
	}
	if got := outs[1].Modes["p"]; got != audit {
		t.Errorf("paused in Waiting: mode %q, want Audit kept", got)
	}
	if got := Modes(waves, outs[2].Waves); got["p"] != enforce {
		t.Errorf("Modes of an Enforcing wave: %v", got)
	}
}

// A wave never moves backwards by itself: a Done wave whose measures turn bad stays Done.
func TestDoneWaveStaysDone(t *testing.T) {
	waves := []Wave{{Name: "w", Clusters: []string{"a"}}}
	prev := []WaveState{{Name: "w", Phase: Done, Since: t0}}
	out := Next(Input{Waves: waves, Previous: prev, Now: at(time.Hour), Measures: map[string]Measure{"a": {Synced: true, Fresh: true, Fail: 100}}})
	if w := out.Waves[0]; w.Phase != Done || !w.Since.Equal(t0) || out.Modes["a"] != enforce || !out.Done {
		t.Errorf("%+v %v", w, out.Modes)
	}
}

// Clusters go to the first wave that selects them; a last wave without selection takes the
// rest; a placed cluster no wave selects is in none.
func TestWavesAssignClusters(t *testing.T) {
	placed := []Cluster{
		{Name: "a", Labels: map[string]string{"env": "staging"}},
		{Name: "b", Labels: map[string]string{"env": "prod"}},
		{Name: "c", Labels: map[string]string{"env": "staging"}},
		{Name: "d"},
	}
	staging := &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"env": "staging"}}
	soak := &metav1.Duration{Duration: time.Minute}
	got, err := Waves([]policyhubv1.RolloutWave{
		{Name: "canary", Clusters: []string{"c", "zzz"}},
		{Name: "staging", ClusterSelector: staging, Gate: policyhubv1.RolloutGate{MaxFail: 2, MaxBlocked: 1, Soak: soak, Approval: true}},
		{Name: "rest"},
	}, placed)
	if err != nil {
		t.Fatal(err)
	}
	want := []Wave{
		{Name: "canary", Clusters: []string{"c"}},
		{Name: "staging", Clusters: []string{"a"}, Gate: Gate{MaxFail: 2, MaxBlocked: 1, Soak: time.Minute, Approval: true}},
		{Name: "rest", Clusters: []string{"b", "d"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("waves\n got %+v\nwant %+v", got, want)
	}
	got, _ = Waves([]policyhubv1.RolloutWave{{Name: "staging", ClusterSelector: staging}}, placed)
	if want := []Wave{{Name: "staging", Clusters: []string{"a", "c"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("without a rest wave: %+v, want b and d in no wave", got)
	}
	bad := &policyhubv1.ClusterSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}
	if _, err := Waves([]policyhubv1.RolloutWave{{Name: "x", ClusterSelector: bad}}, placed); err == nil || !strings.Contains(err.Error(), "spec.rollout.waves[0].clusterSelector") {
		t.Errorf("a bad selector: %v, want an error naming the field", err)
	}
}

// A wave's selector that requires no label would take every placed cluster (without some label)
// into that wave, collapsing the rollout into it: refused, naming the wave's field. A last wave
// without clusters or selector still takes the rest.
func TestWavesRefuseSelectorsRequiringNoLabel(t *testing.T) {
	placed := []Cluster{{Name: "a", Labels: map[string]string{"env": "staging"}}, {Name: "b", Labels: map[string]string{"env": "prod"}}}
	for _, tt := range []struct {
		name     string
		selector *policyhubv1.ClusterSelector
		want     string
	}{
		{name: "empty", selector: &policyhubv1.ClusterSelector{}, want: "spec.rollout.waves[0].clusterSelector: empty selector"},
		{name: "DoesNotExist alone", selector: &policyhubv1.ClusterSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			want: "spec.rollout.waves[0].clusterSelector: selector has only NotIn or DoesNotExist requirements"},
		{name: "NotIn alone", selector: &policyhubv1.ClusterSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}},
			want: "spec.rollout.waves[0].clusterSelector: selector has only NotIn or DoesNotExist requirements"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Waves([]policyhubv1.RolloutWave{{Name: "first", ClusterSelector: tt.selector}, {Name: "rest"}}, placed)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	got, err := Waves([]policyhubv1.RolloutWave{{Name: "first", Clusters: []string{"a"}}, {Name: "rest"}}, placed)
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[1].Clusters, []string{"b"}) {
		t.Errorf("a last wave without selection: %+v, %v; want it to take b", got, err)
	}
}

// A wave without clusters passes through; several waves may move in one step once Done.
func TestEmptyWavePassesThrough(t *testing.T) {
	waves := []Wave{{Name: "empty"}, {Name: "w", Clusters: []string{"a"}}}
	outs := run(waves, []Input{{Now: at(0)}, {Now: at(1)}, {Now: at(2)}, {Now: at(3)}, {Now: at(4)}, {Now: at(5)}})
	want := []Phase{Auditing, Auditing, Enforcing, Done} // a gate without soak or approval promotes at once
	for i, p := range want {
		if got := outs[i].Waves[0].Phase; got != p {
			t.Errorf("step %d: %s, want %s", i, got, p)
		}
	}
	if got := outs[3].Waves[1].Phase; got != Auditing {
		t.Errorf("after the empty wave is done: %s, want the next one Auditing", got)
	}
}

// Status times have whole seconds: SyncedAt is rounded up so that a report made in the same
// second, maybe before the sync, is never taken for fresh; states read back as written.
func TestStatusesRoundSyncedAtUp(t *testing.T) {
	synced := time.Date(2026, 11, 24, 10, 0, 0, 200_000_000, time.UTC)
	out := Statuses([]WaveState{{Name: "w", Phase: Auditing, Since: synced, SyncedAt: &synced}}, []Wave{{Name: "w", Clusters: []string{"a", "b"}}})
	if got := out[0].SyncedAt.Time; !got.Equal(synced.Truncate(time.Second).Add(time.Second)) {
		t.Errorf("syncedAt %v, want rounded up", got)
	}
	if out[0].Clusters != 2 || !out[0].Since.Time.Equal(synced.Truncate(time.Second)) {
		t.Errorf("%+v", out[0])
	}
	back := StatesOf(out)
	if back[0].Phase != Auditing || back[0].SyncedAt == nil || !back[0].SyncedAt.Equal(out[0].SyncedAt.Time) {
		t.Errorf("read back %+v", back[0])
	}
}

// A wave's sums are of its clusters' true counts: a cluster saying -1000 fail results (an agent
// speaks only for its cluster) cancels nobody's failures, and a huge count does not wrap the sum
// to a negative that would pass the gate.
func TestHostileMeasuresDoNotPassTheGate(t *testing.T) {
	waves := []Wave{{Name: "prod", Clusters: []string{"honest", "hostile"}, Gate: Gate{MaxFail: 0, MaxBlocked: 0}}}
	for _, tc := range []struct {
		name            string
		hostile         Measure
		wantFail, wantB int64
	}{
		{"negative counts", Measure{Synced: true, Fresh: true, Fail: -1000, Blocked: -1000}, 5, 1},
		{"the largest counts", Measure{Synced: true, Fresh: true, Fail: math.MaxInt64, Blocked: math.MaxInt64}, math.MaxInt64, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			measures := map[string]Measure{"honest": {Synced: true, Fresh: true, Fail: 5, Blocked: 1}, "hostile": tc.hostile}
			outs := run(waves, []Input{
				{Now: at(0)},
				{Now: at(time.Second), Measures: measures},     // synced: judged from the next step
				{Now: at(2 * time.Second), Measures: measures}, // judged
			})
			w := outs[2].Waves[0]
			if w.Phase != Waiting || w.Fail != tc.wantFail || w.Blocked != tc.wantB || !strings.Contains(w.Reason, "fail results") {
				t.Errorf("wave %+v, want Waiting on %d fail results (blocked %d)", w, tc.wantFail, tc.wantB)
			}
		})
	}
}

// A wave's reason names the clusters whose refusals may include server-side dry-runs, at most
// maxNamedClusters of them.
func TestBlockedReasonNamesClustersCountingDryRuns(t *testing.T) {
	var clusters []string
	measures := map[string]Measure{}
	for i := range 8 {
		c := fmt.Sprintf("c%d", i)
		clusters = append(clusters, c)
		measures[c] = Measure{Synced: true, Fresh: true, Blocked: 1, DryRunsIncluded: i%4 != 0}
	}
	measures["c7"] = Measure{Synced: true, Fresh: true, DryRunsIncluded: true} // nothing refused: not named
	waves := []Wave{{Name: "w", Clusters: clusters}}
	out := Next(Input{Now: at(time.Second), Waves: waves, Measures: measures, Previous: reported(WaveState{Name: "w", Phase: Auditing, Since: t0})})
	want := "7 admissions refused (server-side dry-runs included in c1, c2, c3, c5, c6: a CEL policy's, or Kyverno's metrics unread there), at most 0 allowed"
	if r := out.Waves[0].Reason; r != want {
		t.Errorf("reason %q, want %q", r, want)
	}
	for i := 8; i < 12; i++ {
		c := fmt.Sprintf("c%d", i)
		waves[0].Clusters = append(waves[0].Clusters, c)
		measures[c] = Measure{Synced: true, Fresh: true, Blocked: 1, DryRunsIncluded: true}
	}
	out = Next(Input{Now: at(time.Second), Waves: waves, Measures: measures, Previous: reported(WaveState{Name: "w", Phase: Auditing, Since: t0})})
	if r := out.Waves[0].Reason; !strings.Contains(r, "included in c1, c10, c11, c2, c3 and 4 more:") {
		t.Errorf("reason %q: want 5 clusters named and 4 more", r)
	}
}
