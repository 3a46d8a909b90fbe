package v1alpha1

import (
	"math"
	"testing"
)

func TestLegacyInventoryTotals(t *testing.T) {
	var none *LegacyInventory
	if none.Total() != 0 || none.Owned(LegacyOwnerOther) != 0 {
		t.Fatal("a nil inventory counts nothing")
	}
	inv := &LegacyInventory{Counts: []LegacyCount{
		{Kind: "ClusterPolicy", Owner: LegacyOwnerPolicyhub, Count: 2},
		{Kind: "ClusterPolicy", Owner: LegacyOwnerOther, Count: 3},
		{Kind: "PolicyException", Owner: LegacyOwnerOther, Count: -7}, // an older CRD let it in
	}}
	if got := inv.Total(); got != 5 {
		t.Errorf("Total = %d, want 5", got)
	}
	if got := inv.Owned(LegacyOwnerOther); got != 3 {
		t.Errorf("Owned(other) = %d, want 3", got)
	}
	huge := &LegacyInventory{Counts: []LegacyCount{{Kind: "Policy", Owner: LegacyOwnerOther, Count: math.MaxInt64}, {Kind: "ClusterPolicy", Owner: LegacyOwnerOther, Count: 1}}}
	if got := huge.Total(); got != math.MaxInt64 {
		t.Errorf("Total saturates: got %d", got)
	}
}

func TestEngineReportsResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine *EngineInfo
		result string
		want   bool
	}{
		{"no engine", nil, "pass", true},
		{"no kyverno facts", &EngineInfo{}, "pass", true},
		{"every result", &EngineInfo{Kyverno: &KyvernoFacts{Version: "v1.19.1"}}, "pass", true},
		{"fail only: pass unknown", &EngineInfo{Kyverno: &KyvernoFacts{ReportedResults: []string{"fail"}}}, "pass", false},
		{"fail only: fail reported", &EngineInfo{Kyverno: &KyvernoFacts{ReportedResults: []string{"fail"}}}, "fail", true},
	} {
		if got := tc.engine.ReportsResult(tc.result); got != tc.want {
			t.Errorf("%s: ReportsResult(%s) = %v, want %v", tc.name, tc.result, got, tc.want)
		}
	}
}
