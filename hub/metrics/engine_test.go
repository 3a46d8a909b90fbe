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
