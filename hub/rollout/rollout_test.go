package rollout

import (
	"reflect"
	"strings"
	"testing"
	"time"

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
	m := func(fresh bool, fail int64, synced bool) Measure {
		return Measure{Fresh: fresh, Fail: fail, Synced: synced}
	}
	outs := run(waves, []Input{
		{Now: at(0)}, // staging starts
		{Now: at(10 * time.Second), Measures: map[string]Measure{"staging-1": m(false, 0, true)}},                             // no report yet
		{Now: at(20 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 2, true)}},                              // 2 fail: holds
		{Now: at(30 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, true)}},                              // fixed: soak starts
		{Now: at(60 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, true)}},                              // soaking
		{Now: at(91 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, true)}},                              // soaked: Enforce
		{Now: at(95 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, false)}},                             // Enforce not synced yet
		{Now: at(100 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, true)}},                             // staging done, prod starts
		{Now: at(110 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, true), "prod-1": m(true, 0, true)}}, // prod reported: Enforce
		{Now: at(120 * time.Second), Measures: map[string]Measure{"staging-1": m(true, 0, true), "prod-1": m(true, 0, true)}},
	})
	want := [][]Phase{
		{Auditing, Pending},
		{Auditing, Pending},
		{Waiting, Pending},
		{Waiting, Pending},
		{Waiting, Pending},
		{Enforcing, Pending},
		{Enforcing, Pending},
		{Done, Auditing},
		{Done, Enforcing}, // prod's gate (no soak, no approval) holds at once
		{Done, Done},
	}
	for i, out := range outs {
		if got := phases(out); !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("step %d: phases %v, want %v (%+v)", i, got, want[i], out.Waves)
		}
	}
	if r := outs[1].Waves[0].Reason; !strings.Contains(r, "reports on the current version from staging-1") {
		t.Errorf("step 1 reason %q", r)
	}
	if w := outs[2].Waves[0]; w.Fail != 2 || w.Reason != "2 fail results, at most 0 allowed" || w.HoldingSince != nil {
		t.Errorf("step 2: %+v, want the measured fail count as the reason", w)
	}
	if w := outs[4].Waves[0]; w.HoldingSince == nil || !w.HoldingSince.Equal(at(30*time.Second)) || !strings.Contains(w.Reason, "soaking: the gate has held for 30s of 1m0s") {
		t.Errorf("step 4: %+v", w)
	}
	if got := outs[2].Modes; !reflect.DeepEqual(got, map[string]policyhubv1.Mode{"staging-1": audit}) {
		t.Errorf("while staging audits, modes %v: prod must get nothing", got)
	}
	if got := outs[7].Modes; !reflect.DeepEqual(got, map[string]policyhubv1.Mode{"staging-1": enforce, "prod-1": audit}) {
		t.Errorf("once staging is done, modes %v", got)
	}
	if !outs[9].Done || outs[8].Done {
		t.Errorf("done after the last step: %v, before it: %v; want only after", outs[9].Done, outs[8].Done)
	}
	if !outs[7].Waves[0].Since.Equal(at(100 * time.Second)) {
		t.Errorf("staging Done since %v, want the step it became so", outs[7].Waves[0].Since)
	}
}

// A break in the gate restarts the soak; blocked admissions are gated too.
func TestGateBreakRestartsTheSoak(t *testing.T) {
	waves := []Wave{{Name: "w", Clusters: []string{"a", "b"}, Gate: Gate{MaxFail: 1, MaxBlocked: 0, Soak: time.Minute}}}
	ok := map[string]Measure{"a": {Fresh: true, Fail: 1}, "b": {Fresh: true}}
	blocked := map[string]Measure{"a": {Fresh: true}, "b": {Fresh: true, Blocked: 3}}
	outs := run(waves, []Input{
		{Now: at(0)},
		{Now: at(time.Second), Measures: ok},
		{Now: at(40 * time.Second), Measures: blocked},
		{Now: at(50 * time.Second), Measures: ok},
		{Now: at(100 * time.Second), Measures: ok},
		{Now: at(111 * time.Second), Measures: ok},
	})
	if r := outs[2].Waves[0].Reason; r != "3 admissions would be blocked, at most 0 allowed" {
		t.Errorf("blocked: reason %q", r)
	}
	if w := outs[4].Waves[0]; w.Phase != Waiting || !w.HoldingSince.Equal(at(50*time.Second)) {
		t.Errorf("after the break: %+v, want soaking since 50s", w)
	}
	if w := outs[5].Waves[0]; w.Phase != Enforcing {
		t.Errorf("soaked a minute since the break: %+v, want Enforcing", w)
	}
}

// Approval holds a wave whose gate holds; pause holds everything, even an approved wave.
func TestApprovalAndPause(t *testing.T) {
	waves := []Wave{{Name: "prod", Clusters: []string{"p"}, Gate: Gate{Approval: true}}}
	fresh := map[string]Measure{"p": {Fresh: true, Synced: true}}
	outs := run(waves, []Input{
		{Now: at(0)},
		{Now: at(time.Second), Measures: fresh},
		{Now: at(2 * time.Second), Measures: fresh, Approved: map[string]bool{"prod": true}, Paused: true},
		{Now: at(3 * time.Second), Measures: fresh, Approved: map[string]bool{"prod": true}},
	})
	if w := outs[1].Waves[0]; w.Phase != Waiting || w.Reason != "waiting for approval" {
		t.Errorf("unapproved: %+v", w)
	}
	if w := outs[2].Waves[0]; w.Phase != Waiting {
		t.Errorf("paused: %+v, want it held where it was", w)
	}
	if w := outs[3].Waves[0]; w.Phase != Enforcing {
		t.Errorf("approved and resumed: %+v, want Enforcing", w)
	}
	if got := outs[2].Modes["p"]; got != audit {
		t.Errorf("paused in Waiting: mode %q, want Audit kept", got)
	}
}

// A wave never moves backwards by itself: a Done wave whose measures turn bad stays Done.
func TestDoneWaveStaysDone(t *testing.T) {
	waves := []Wave{{Name: "w", Clusters: []string{"a"}}}
	prev := []WaveState{{Name: "w", Phase: Done, Since: t0}}
	out := Next(Input{Waves: waves, Previous: prev, Now: at(time.Hour), Measures: map[string]Measure{"a": {Fresh: true, Fail: 100}}})
	if w := out.Waves[0]; w.Phase != Done || !w.Since.Equal(t0) || out.Modes["a"] != enforce || !out.Done {
		t.Errorf("%+v %v", w, out.Modes)
	}
}
