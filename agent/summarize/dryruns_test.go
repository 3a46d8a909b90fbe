package summarize

import (
	"testing"

	"github.com/policyhub/policyhub/agent/collect"
)

// A policy's server-side dry-runs move from blocked to blockedDryRuns, at most its refusals;
// a CEL policy's refusals, and dry-runs of a policy without refusals, change nothing.
func TestSummarizeTakesOutDryRuns(t *testing.T) {
	shopLimits := collect.PolicyKey{Kind: "Policy", Namespace: "shop", Name: "limits"}
	cel := collect.PolicyKey{Kind: "ValidatingPolicy", Name: "require-labels"}
	quiet := collect.PolicyKey{Kind: "ClusterPolicy", Name: "quiet"}
	var s collect.Snapshot
	s.Blocks = []*collect.Block{
		{Policy: requireLabels, Resource: pod("shop", "a"), Message: "refused", Time: t0, Count: 3},
		{Policy: requireLabels, Resource: pod("shop", "b"), Message: "refused", Time: t0, Count: 1},
		{Policy: shopLimits, Resource: pod("shop", "c"), Message: "refused", Time: t0, Count: 1},
		{Policy: disallowLatest, Resource: pod("shop", "d"), Message: "refused", Time: t0, Count: 2},
		{Policy: cel, Resource: pod("shop", "e"), Message: "refused", Time: t0, Count: 5},
	}
	s.DryRuns = map[collect.PolicyKey]int64{requireLabels: 3, shopLimits: 4, quiet: 7}
	got := Summarize(s, Options{Cluster: "east-1"})
	want := map[collect.PolicyKey][2]int64{
		requireLabels:  {1, 3},
		shopLimits:     {0, 1}, // more dry-runs than refusals read: the refusals
		disallowLatest: {2, 0},
		cel:            {5, 0},
	}
	if len(got.Policies) != len(want) {
		t.Fatalf("%d policies, want %d: %+v", len(got.Policies), len(want), got.Policies)
	}
	for _, p := range got.Policies {
		w, ok := want[collect.PolicyKey{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}]
		if !ok || p.Blocked != w[0] || p.BlockedDryRuns != w[1] {
			t.Errorf("%s %s/%s: blocked %d, dry-runs %d; want %v", p.Kind, p.Namespace, p.Name, p.Blocked, p.BlockedDryRuns, w)
		}
	}
	if got.Blocked != 8 || got.BlockedDryRuns != 4 {
		t.Errorf("cluster: blocked %d, dry-runs %d; want 8 and 4", got.Blocked, got.BlockedDryRuns)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the summary breaks the API's rules: %v", err)
	}
}
