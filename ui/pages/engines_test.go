package pages

import (
	"slices"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

// A mixed fleet in the web view: the grid filters policies by engine and shows each cluster's
// engines; a cluster's page names each policy's engine and shows Gatekeeper's passes as unknown
// (its audit counts violations only), never 0.
func TestEnginesSideBySide(t *testing.T) {
	s := &read.Snapshot{Now: time.Now(), Clusters: map[string]map[string]string{"kyverno": {}, "gatekeeper": {}, "plain": {}}}
	gk := summary("gatekeeper", policyhubv1.PolicySummary{Name: "must-have-team", Kind: "K8sRequiredLabels", Engine: policyhubv1.EngineGatekeeper,
		Results: policyhubv1.ResultCounts{Fail: 4}})
	gk.Spec.Engine.Engines = []policyhubv1.PolicyEngine{policyhubv1.EngineKubernetes, policyhubv1.EngineGatekeeper}
	plain := summary("plain", policyhubv1.PolicySummary{Name: "vap-team", Kind: "ValidatingAdmissionPolicy", Engine: policyhubv1.EngineKubernetes,
		Results: policyhubv1.ResultCounts{Pass: 3, Fail: 2}})
	plain.Spec.Engine.Engines = []policyhubv1.PolicyEngine{policyhubv1.EngineKubernetes}
	s.Summaries = []policyhubv1.PolicyReportSummary{summary("kyverno", policy("latest", "ClusterPolicy", "high", 1)), gk, plain}

	all := BuildFleet(s, FleetQuery{})
	if !slices.Equal(all.Engines, []string{"Gatekeeper", "Kubernetes", "Kyverno"}) || all.Totals.Policies != 3 {
		t.Errorf("engines to filter by %v, %d policies", all.Engines, all.Totals.Policies)
	}
	for _, r := range all.Rows {
		if r.Cluster == "gatekeeper" && !slices.Equal(r.Engines, gk.Spec.Engine.Engines) {
			t.Errorf("row gatekeeper's engines %v", r.Engines)
		}
	}
	only := BuildFleet(s, FleetQuery{Engine: "Gatekeeper"})
	if len(only.Columns) != 1 || only.Columns[0].Name != "must-have-team" || only.Columns[0].Engine != "Gatekeeper" || only.Totals.Failing != 1 {
		t.Errorf("filtered to Gatekeeper: columns %+v, failing %d", only.Columns, only.Totals.Failing)
	}
	if u := FleetURL(FleetQuery{Engine: "Gatekeeper"}); u != "/fleet?engine=Gatekeeper" {
		t.Errorf("the filter's URL %q", u)
	}

	page := BuildCluster(s, "gatekeeper", &gk)
	if len(page.Policies) != 1 || page.Policies[0].EngineName != policyhubv1.EngineGatekeeper || page.Policies[0].PassKnown || page.Policies[0].SkipKnown {
		t.Errorf("the Gatekeeper cluster's policies %+v", page.Policies)
	}
	vap := BuildCluster(s, "plain", &plain)
	if p := vap.Policies[0]; p.EngineName != policyhubv1.EngineKubernetes || !p.PassKnown || p.Results.Pass != 3 {
		t.Errorf("the admission policy's row %+v", p)
	}
}
