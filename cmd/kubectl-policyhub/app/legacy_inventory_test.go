package app

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
)

// The inventory's table and JSON: per cluster the counts by kind and owner, the named objects,
// the upgrade gate's verdict and why, a fleet total; a cluster without an inventory is unknown.
func TestInventoryReport(t *testing.T) {
	summary := func(cluster string, legacy *policyhubv1.LegacyInventory) *policyhubv1.PolicyReportSummary {
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
		s.Spec.Engine = policyhubv1.EngineInfo{Kyverno: &policyhubv1.KyvernoFacts{Version: "v1.19.1"}, Legacy: legacy}
		return s
	}
	summaries := []*policyhubv1.PolicyReportSummary{
		summary("cluster-1", &policyhubv1.LegacyInventory{
			Counts: []policyhubv1.LegacyCount{
				{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerPolicyhub, Count: 1},
				{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: 2},
			},
			Objects: []policyhubv1.LegacyObject{
				{Kind: "ClusterPolicy", Name: "team-a", Owner: policyhubv1.LegacyOwnerOther},
				{Kind: "ClusterPolicy", Name: "require-labels", Owner: policyhubv1.LegacyOwnerPolicyhub},
			},
		}),
		summary("cluster-2", &policyhubv1.LegacyInventory{}),
	}
	inv := pages.BuildInventory(summaries, map[string]map[string]string{"cluster-1": nil, "cluster-2": nil, "cluster-3": nil}, nil,
		func(*policyhubv1.PolicyReportSummary) bool { return false })
	report := toInventoryReport(inv)
	var out bytes.Buffer
	if err := writeReport(&out, "table", report, func(w io.Writer) error { printInventoryTable(w, report); return nil }); err != nil {
		t.Fatal(err)
	}
	want := `CLUSTER     KYVERNO     ENFORCES-LEGACY   LEGACY      POLICYHUB   OTHER       BY-KIND                                             KYVERNO-1.20-UPGRADE
cluster-1   v1.19.1     yes               3           1           2           ClusterPolicy=2(other),ClusterPolicy=1(policyhub)   would-fail
cluster-2   v1.19.1     yes               0           0           0           <none>                                              passes
cluster-3   <unknown>   unknown           <unknown>   <unknown>   <unknown>   <unknown>                                           unknown
TOTAL       -           -                 3           1           2           -                                                   1-would-fail,1-unknown

Why:
  cluster-1: 3 legacy objects (2 ClusterPolicy (other), 1 ClusterPolicy (policyhub)): Kyverno 1.20's Helm upgrade refuses while any exists
  cluster-3: no summary from the cluster's agent: its legacy objects are not known

Legacy objects (at most 50 named per cluster, those not owned by policyhub first):
CLUSTER     KIND            NAMESPACE   NAME             OWNER
cluster-1   ClusterPolicy   -           team-a           other
cluster-1   ClusterPolicy   -           require-labels   policyhub
cluster-1   (1-more)        -           -                -
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}
	data, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"total":{"legacyObjects":3,"policyhub":1,"other":2},"upgradeBlocked":1,"unknown":1`,
		`{"name":"cluster-3","kyvernoVersion":"","enforcesLegacy":"unknown","known":false,"stale":false,"legacyObjects":0,"policyhub":0,"other":0,"counts":[],"objects":[],"unnamed":0,"upgradeBlocked":false,"reason":"no summary`,
		`"objects":[{"kind":"ClusterPolicy","name":"team-a","owner":"other"}`} {
		if !strings.Contains(string(data), part) {
			t.Errorf("JSON lacks %s:\n%s", part, data)
		}
	}
}
