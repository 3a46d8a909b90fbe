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
	newly := int64(1)
	gate := &policyhubv1.PreviewGate{MaxWouldFail: 3, MaxNewlyFailing: &newly}
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
	if p := (&Plan{Waves: waves, States: started.Waves, previewGate: gate}); p.Previewing() {
		t.Error("the plan still previews once the first wave started")
	}
	if p := (&Plan{Waves: waves, previewGate: gate}); !p.Previewing() {
		t.Error("a new version under a preview gate is not previewed")
	}
}
