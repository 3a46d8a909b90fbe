package pages

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func legacySummary(cluster, version string, legacy *policyhubv1.LegacyInventory) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
	s.Spec.Cluster = cluster
	if version != "" {
		s.Spec.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: version}
	}
	s.Spec.Engine.Legacy = legacy
	return s
}

// Per cluster: counts by kind and owner, the named objects, and the upgrade gate's verdict with
// the reason; a cluster without an inventory is unknown, never "passes".
func TestBuildInventory(t *testing.T) {
	summaries := []*policyhubv1.PolicyReportSummary{
		legacySummary("blocked", "v1.19.1", &policyhubv1.LegacyInventory{
			Counts: []policyhubv1.LegacyCount{
				{Kind: "PolicyException", Owner: policyhubv1.LegacyOwnerPolicyhub, Count: 1},
				{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: 201},
			},
			Objects: []policyhubv1.LegacyObject{{Kind: "ClusterPolicy", Name: "team-a", Owner: policyhubv1.LegacyOwnerOther}},
		}),
		legacySummary("clean", "v1.20.0", &policyhubv1.LegacyInventory{}),
		legacySummary("old-agent", "", nil),
	}
	inventory := map[string]map[string]string{"blocked": nil, "clean": nil, "old-agent": nil, "silent": nil}
	inv := BuildInventory(summaries, inventory, nil, func(*policyhubv1.PolicyReportSummary) bool { return false })
	if inv.Total != (LegacyTotals{Total: 202, Policyhub: 1, Other: 201}) || inv.Blocked != 1 || inv.Unknown != 2 {
		t.Fatalf("fleet: %+v blocked %d unknown %d", inv.Total, inv.Blocked, inv.Unknown)
	}
	byName := map[string]InventoryCluster{}
	for _, c := range inv.Clusters {
		byName[c.Name] = c
	}
	b := byName["blocked"]
	if !b.UpgradeBlocked || b.Counts[0].Kind != "ClusterPolicy" || b.Unnamed != 201 || b.EnforcesLegacy != "yes" ||
		!strings.Contains(b.Why, "201 ClusterPolicy (other)") || !strings.Contains(b.Why, "upgrade refuses") {
		t.Errorf("blocked: %+v", b)
	}
	if c := byName["clean"]; c.UpgradeBlocked || !c.Known || c.EnforcesLegacy != "no" {
		t.Errorf("clean: %+v", c)
	}
	for _, name := range []string{"old-agent", "silent"} {
		if c := byName[name]; c.Known || c.UpgradeBlocked || c.Why == "" {
			t.Errorf("%s: %+v, want unknown with a reason", name, c)
		}
	}
	only := BuildInventory(summaries, inventory, []string{"clean"}, func(*policyhubv1.PolicyReportSummary) bool { return false })
	if len(only.Clusters) != 1 || only.Clusters[0].Name != "clean" || only.Total.Total != 0 {
		t.Errorf("--cluster clean: %+v", only)
	}
}
