package rollout

import (
	"strings"
	"testing"
	"time"
)

// A Kyverno upgrade wave by wave: a wave gated on maxLegacyObjects 0 holds while a cluster holds
// a legacy object (named with its count in the reason) or has not reported an inventory, and
// proceeds once every cluster reports none; its sum is in the state. The next wave starts only
// then.
func TestWaveGatedOnLegacyObjects(t *testing.T) {
	zero := int64(0)
	waves := []Wave{
		{Name: "canary", Clusters: []string{"c-1", "c-2"}, Gate: Gate{MaxLegacyObjects: &zero}},
		{Name: "rest", Clusters: []string{"r-1"}},
	}
	legacy := func(n int64) *int64 { return &n }
	m := func(objects *int64) Measure { return Measure{Synced: true, Fresh: true, LegacyObjects: objects} }
	s := time.Second
	outs := run(waves, []Input{
		{Now: at(0)},
		{Now: at(1 * s), Measures: map[string]Measure{"c-1": m(legacy(1)), "c-2": m(nil)}}, // synced
		{Now: at(2 * s), Measures: map[string]Measure{"c-1": m(legacy(1)), "c-2": m(nil)}}, // c-1 holds one, c-2 unknown
		{Now: at(3 * s), Measures: map[string]Measure{"c-1": m(legacy(1)), "c-2": m(legacy(0))}},
		{Now: at(4 * s), Measures: map[string]Measure{"c-1": m(legacy(0)), "c-2": m(legacy(0))}}, // deleted: promoted
	})
	held := outs[2].Waves[0]
	if held.Phase != Waiting || !strings.Contains(held.Reason, "c-1 (1)") || !strings.Contains(held.Reason, "no legacy inventory reported by c-2") ||
		held.LegacyObjects == nil || *held.LegacyObjects != 1 {
		t.Errorf("held on c-1's object and c-2's missing inventory: %+v", held)
	}
	if w := outs[3].Waves[0]; w.Phase != Waiting || strings.Contains(w.Reason, "c-2") || !strings.Contains(w.Reason, "at most 0 per cluster") {
		t.Errorf("c-2 reported none, c-1 still holds: %+v", w)
	}
	if p := phases(outs[3]); p[1] != Pending {
		t.Errorf("the next wave started while canary held: %v", p)
	}
	if w := outs[4].Waves[0]; w.Phase != Enforcing || w.LegacyObjects == nil || *w.LegacyObjects != 0 {
		t.Errorf("no legacy object left: %+v, want Enforcing with 0 measured", w)
	}
	// A wave without the gate never measures legacy objects, whatever its clusters hold.
	if w := outs[4].Waves[1]; w.LegacyObjects != nil {
		t.Errorf("ungated wave measured %v", *w.LegacyObjects)
	}
}

// The limit is per cluster: two clusters at the limit pass though their sum is above it.
func TestLegacyGateIsPerCluster(t *testing.T) {
	one := int64(1)
	w := Wave{Name: "w", Clusters: []string{"a", "b"}, Gate: Gate{MaxLegacyObjects: &one}}
	n := int64(1)
	var s WaveState
	if held, reason := legacyGate(w, map[string]Measure{"a": {LegacyObjects: &n}, "b": {LegacyObjects: &n}}, &s); held || *s.LegacyObjects != 2 {
		t.Errorf("held %v (%s), sum %d", held, reason, *s.LegacyObjects)
	}
}
