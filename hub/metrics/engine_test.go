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

// A cluster's Kyverno facts: one info series, and its legacy objects by kind and owner (bounded:
// every known kind and owner, zeros included, nothing else); a cluster whose agent reported no
// inventory has no legacy series (unknown, not 0).
func TestEngineMetrics(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return now }, nil)
	c.Set("cluster-1", seenAt(now, policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-1", GeneratedAt: &metav1.Time{Time: now},
		Engine: policyhubv1.EngineInfo{Kyverno: &policyhubv1.KyvernoFacts{Version: "v1.19.1"}, Legacy: &policyhubv1.LegacyInventory{
			Counts: []policyhubv1.LegacyCount{
				{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: 200},
				{Kind: "PolicyException", Owner: policyhubv1.LegacyOwnerPolicyhub, Count: 1},
				{Kind: "Bogus", Owner: "someone", Count: 9}, // an older CRD let it in: no series
			},
			Objects: []policyhubv1.LegacyObject{{Kind: "ClusterPolicy", Name: "per-object-names-are-no-label", Owner: policyhubv1.LegacyOwnerOther}},
		}}}))
	c.Set("cluster-2", seenAt(now, policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-2", GeneratedAt: &metav1.Time{Time: now},
		Engine:   policyhubv1.EngineInfo{Kyverno: &policyhubv1.KyvernoFacts{Version: "v1.20.0", ReportedResults: []string{"fail"}}},
		Totals:   policyhubv1.ResultCounts{Fail: 3},
		Policies: []policyhubv1.PolicySummary{{Name: "p", Kind: "ValidatingPolicy", Results: policyhubv1.ResultCounts{Fail: 3}}}}))
	// An older agent, or one that found no Kyverno: unknown, one series still.
	c.Set("cluster-3", seenAt(now, policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-3", GeneratedAt: &metav1.Time{Time: now}}))

	want := `
# HELP policyhub_kyverno_info 1 for each cluster with a summary: its Kyverno's version as its agent read it ("" when the agent could not tell) and whether that version still enforces the legacy kinds (yes, no, unknown).
# TYPE policyhub_kyverno_info gauge
policyhub_kyverno_info{cluster="cluster-1",enforces_legacy="yes",version="v1.19.1"} 1
policyhub_kyverno_info{cluster="cluster-2",enforces_legacy="no",version="v1.20.0"} 1
policyhub_kyverno_info{cluster="cluster-3",enforces_legacy="unknown",version=""} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_kyverno_info"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "policyhub_cluster_legacy_objects"); n != 2*len(policyhubv1.LegacyKinds) {
		t.Errorf("%d legacy series, want %d: every kind and owner of cluster-1's, none of cluster-2's (no inventory)", n, 2*len(policyhubv1.LegacyKinds))
	}
	for labels, want := range map[[3]string]float64{
		{"cluster-1", "ClusterPolicy", "other"}: 200, {"cluster-1", "PolicyException", "policyhub"}: 1, {"cluster-1", "Policy", "other"}: 0,
	} {
		if got := gaugeValue(t, reg, "policyhub_cluster_legacy_objects", map[string]string{"cluster": labels[0], "kind": labels[1], "owner": labels[2]}); got != want {
			t.Errorf("legacy objects %v = %v, want %v", labels, got, want)
		}
	}
	// A fail-only Kyverno: pass (and the other kinds it does not write) have no series, fail does.
	for _, metric := range []string{"policyhub_cluster_results", "policyhub_policy_results"} {
		if has(t, reg, metric, map[string]string{"cluster": "cluster-2", "result": "pass"}) {
			t.Errorf("%s exports pass for a cluster whose Kyverno writes no pass results", metric)
		}
		if got := gaugeValue(t, reg, metric, map[string]string{"cluster": "cluster-2", "result": "fail"}); got != 3 {
			t.Errorf("%s fail = %v, want 3", metric, got)
		}
	}
}

// gaugeValue is the value of the one series of metric with labels (others may have more labels).
func gaugeValue(t *testing.T, reg *prometheus.Registry, metric string, labels map[string]string) float64 {
	t.Helper()
	v, ok := findSeries(t, reg, metric, labels)
	if !ok {
		t.Fatalf("no series %s%v", metric, labels)
	}
	return v
}

// has says whether metric has a series with labels.
func has(t *testing.T, reg *prometheus.Registry, metric string, labels map[string]string) bool {
	t.Helper()
	_, ok := findSeries(t, reg, metric, labels)
	return ok
}

func findSeries(t *testing.T, reg *prometheus.Registry, metric string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

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
