package rollout

import (
	"reflect"
	"strings"
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Under a preview gate the first wave starts only on a complete preview within the gate; over it
// (or while it is incomplete) nothing of the version ships, and no later wave moves either.
func TestPreviewGateHoldsTheFirstWave(t *testing.T) {
	waves := []Wave{{Name: "staging", Clusters: []string{"s-1"}}, {Name: "prod", Clusters: []string{"p-1"}}}
	wouldFail, newly := int64(3), int64(1)
	gate := &policyhubv1.PreviewGate{MaxWouldFail: &wouldFail, MaxNewlyFailing: &newly}
	for _, tc := range []struct {
		name       string
		preview    *Preview
		wantPhase  Phase
		wantReason string
	}{
		{"no preview yet", nil, Pending, "previewing the version: 0 of 0 clusters reported"},
		{"incomplete", &Preview{Clusters: 2, Reported: 1, WouldFail: 0}, Pending, "previewing the version: 1 of 2 clusters reported"},
		{"over the would-fail bound", &Preview{Complete: true, Clusters: 2, Reported: 2, WouldFail: 4}, Pending, "would fail 4 resources, at most 3 allowed; it is not shipped"},
		{"over the newly failing bound", &Preview{Complete: true, Clusters: 2, Reported: 2, WouldFail: 3, NewlyFailing: 2}, Pending, "would newly fail 2 resources, at most 1 allowed"},
		{"within", &Preview{Complete: true, Clusters: 2, Reported: 2, WouldFail: 3, NewlyFailing: 1}, Auditing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Next(Input{Waves: waves, Now: t0, PreviewGate: gate, Preview: tc.preview})
			if got := phases(out); !reflect.DeepEqual(got, []Phase{tc.wantPhase, Pending}) {
				t.Fatalf("phases %v, want [%s Pending]", got, tc.wantPhase)
			}
			if !strings.Contains(out.Waves[0].Reason, tc.wantReason) || (tc.wantReason == "") != (out.Waves[0].Reason == "") {
				t.Errorf("reason %q, want %q", out.Waves[0].Reason, tc.wantReason)
			}
			if _, ships := out.Modes["s-1"]; ships != (tc.wantPhase == Auditing) {
				t.Errorf("modes %v: the first wave's cluster gets the version only once the gate passes", out.Modes)
			}
		})
	}
	// Once started, the gate is behind the rollout: a later preview says nothing about it.
	started := Next(Input{Waves: waves, Now: t0, PreviewGate: gate, Preview: &Preview{Complete: true}})
	again := Next(Input{Waves: waves, Previous: started.Waves, Now: t0, PreviewGate: gate, Preview: &Preview{Complete: true, WouldFail: 100}})
	if again.Waves[0].Phase != Auditing {
		t.Errorf("a started wave went back to %s", again.Waves[0].Phase)
	}
	if p := (&Plan{Waves: waves, States: started.Waves, previewGate: gate}); p.PreviewClusters() != nil {
		t.Errorf("the plan still previews in %v once the first wave started", p.PreviewClusters())
	}
	if p := (&Plan{Waves: waves, previewGate: gate}); !reflect.DeepEqual(p.PreviewClusters(), []string{"s-1", "p-1"}) {
		t.Errorf("a new version under a preview gate is previewed in %v, want every wave's cluster", p.PreviewClusters())
	}
}

// With parity each wave swaps once its clusters report the shadow judging like the running
// version: straight to Enforce with the stable version kept beside the new one until the wave
// is done; waves not reached keep previewing; a difference over the accepted bound holds.
func TestParityGateSwapsWaveByWave(t *testing.T) {
	waves := []Wave{{Name: "staging", Clusters: []string{"s-1"}}, {Name: "prod", Clusters: []string{"p-1"}}}
	gate := &policyhubv1.PreviewGate{Parity: &policyhubv1.ParityGate{MaxDiffering: 1}}
	stable := &policyhubv1.StableVersion{Revision: "old", Template: &policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy"}}
	in := func(prev []WaveState, parity map[string]Parity, measures map[string]Measure) Output {
		return Next(Input{Waves: waves, Previous: prev, Now: t0, PreviewGate: gate, Parity: parity, Measures: measures, Swap: true})
	}
	first := Next(Input{Waves: waves, Now: t0, PreviewGate: gate})
	if got := phases(first); !reflect.DeepEqual(got, []Phase{Auditing, Pending}) {
		t.Errorf("a first version (nothing to swap) under a parity gate: %v, want rolled out as usual", got)
	}
	if p := (&Plan{Waves: waves, States: first.Waves, previewGate: gate}); p.PreviewClusters() != nil {
		t.Errorf("a first version is previewed in %v, with nothing to compare it with", p.PreviewClusters())
	}
	waiting := in(nil, nil, nil)
	if got := waiting.Waves[0]; got.Phase != Pending || got.Reason != "parity: waiting for the shadow's results from s-1" {
		t.Fatalf("staging %+v", got)
	}
	differs := in(nil, map[string]Parity{"s-1": {Reported: true, Differ: 2}}, nil)
	if got := differs.Waves[0]; got.Phase != Pending || !strings.Contains(got.Reason, "judges 2 resources of the wave differently from the running one, at most 1 accepted") {
		t.Fatalf("staging %+v", got)
	}
	swapping := in(nil, map[string]Parity{"s-1": {Reported: true, Differ: 1}}, nil)
	if got := phases(swapping); !reflect.DeepEqual(got, []Phase{Enforcing, Pending}) || swapping.Modes["s-1"] != enforce {
		t.Fatalf("phases %v modes %v: want staging straight to Enforce", got, swapping.Modes)
	}
	plan := &Plan{Waves: waves, States: swapping.Waves, Modes: swapping.Modes, previewGate: gate, stable: stable}
	if v := plan.Versions()["s-1"]; v.Mode != enforce || v.Keep == nil || v.Keep.Revision != "old" || v.Keep.Mode != enforce {
		t.Errorf("staging while swapping gets %+v: want the new version in Enforce, the stable one kept in Enforce", v)
	}
	if v := plan.Versions()["p-1"]; v.Revision != "old" || v.Keep != nil {
		t.Errorf("prod before its wave gets %+v, want the stable version", v)
	}
	if got := plan.PreviewClusters(); !reflect.DeepEqual(got, []string{"p-1"}) {
		t.Errorf("previewed in %v, want prod only", got)
	}
	settling := in(swapping.Waves, map[string]Parity{"p-1": {Reported: true}}, map[string]Measure{"s-1": {Synced: true}})
	if got := phases(settling); !reflect.DeepEqual(got, []Phase{Enforcing, Pending}) || !strings.Contains(settling.Waves[0].Reason, "swapping: the new version is in force") {
		t.Fatalf("phases %v (%s): staging keeps the running version while the new one settles", got, settling.Waves[0].Reason)
	}
	if due := NextWake(waves, settling.Waves); !due.Equal(t0.Add(SwapSettle)) {
		t.Errorf("next wake %v, want when the swap has settled", due)
	}
	done := Next(Input{Waves: waves, Previous: settling.Waves, Now: t0.Add(SwapSettle), PreviewGate: gate, Swap: true,
		Parity: map[string]Parity{"p-1": {Reported: true}}, Measures: map[string]Measure{"s-1": {Synced: true}}})
	if got := phases(done); !reflect.DeepEqual(got, []Phase{Done, Enforcing}) {
		t.Fatalf("phases %v: staging done once in force long enough, then prod swaps", got)
	}
	plan = &Plan{Waves: waves, States: done.Waves, Modes: done.Modes, previewGate: gate, stable: stable}
	if v := plan.Versions()["s-1"]; v.Keep != nil {
		t.Errorf("a done wave still keeps the stable version: %+v", v)
	}
}
