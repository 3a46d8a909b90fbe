package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A mixed fleet: each policy's series name its engine (three values at most, whatever a summary
// says), a Gatekeeper Constraint has a fail series only (its audit counts no passes: unknown, not
// 0), a Kubernetes admission policy every kind, and each cluster one info series per engine it runs.
func TestComplianceNamesEachPolicysEngine(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return now }, nil)
	c.Set("mixed", seenAt(now, policyhubv1.PolicyReportSummarySpec{Cluster: "mixed", GeneratedAt: &metav1.Time{Time: now},
		Engine: policyhubv1.EngineInfo{
			Engines:    []policyhubv1.PolicyEngine{policyhubv1.EngineKubernetes, policyhubv1.EngineGatekeeper},
			Gatekeeper: &policyhubv1.GatekeeperFacts{Version: "v3.23.1", Webhook: true},
		},
		Policies: []policyhubv1.PolicySummary{
			{Name: "vap-team", Kind: "ValidatingAdmissionPolicy", Engine: policyhubv1.EngineKubernetes, Results: policyhubv1.ResultCounts{Pass: 3, Fail: 2}, Blocked: 1},
			{Name: "must-have-team", Kind: "K8sRequiredLabels", Engine: policyhubv1.EngineGatekeeper, Results: policyhubv1.ResultCounts{Fail: 4}},
			{Name: "forged", Kind: "X", Engine: "Rego-Everywhere", Results: policyhubv1.ResultCounts{Fail: 1}}, // an older CRD let it in
		},
	}))
	want := `
# HELP policyhub_cluster_engine_info 1 for each policy engine a cluster runs, as its agent reported them (Kyverno, Kubernetes: the API server's own admission policies, Gatekeeper), with the engine's version where the agent could tell it.
# TYPE policyhub_cluster_engine_info gauge
policyhub_cluster_engine_info{cluster="mixed",engine="Gatekeeper",version="v3.23.1"} 1
policyhub_cluster_engine_info{cluster="mixed",engine="Kubernetes",version=""} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_cluster_engine_info"); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		policy, engine, result string
		want                   float64
		exists                 bool
	}{
		{"vap-team", "Kubernetes", "pass", 3, true},
		{"vap-team", "Kubernetes", "fail", 2, true},
		{"vap-team", "Kubernetes", "skip", 0, true},
		{"must-have-team", "Gatekeeper", "fail", 4, true},
		{"must-have-team", "Gatekeeper", "pass", 0, false},
		{"must-have-team", "Gatekeeper", "error", 0, false},
		{"forged", "Kyverno", "fail", 1, true},
	} {
		labels := map[string]string{"policy": tc.policy, "engine": tc.engine, "result": tc.result}
		if got := has(t, reg, "policyhub_policy_results", labels); got != tc.exists {
			t.Errorf("%v: series exists %v, want %v", labels, got, tc.exists)
			continue
		}
		if tc.exists {
			if got := gaugeValue(t, reg, "policyhub_policy_results", labels); got != tc.want {
				t.Errorf("%v = %v, want %v", labels, got, tc.want)
			}
		}
	}
	if has(t, reg, "policyhub_policy_results", map[string]string{"engine": "Rego-Everywhere"}) {
		t.Error("an engine no agent may name became a label value")
	}
	if got := gaugeValue(t, reg, "policyhub_policy_blocked_admissions", map[string]string{"policy": "vap-team", "engine": "Kubernetes"}); got != 1 {
		t.Errorf("vap-team blocked = %v, want 1", got)
	}
}
