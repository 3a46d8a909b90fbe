package chartcheck

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/internal/charttest"
)

// Every PromQL expression the hub chart ships (dashboard and alerts) uses the hub's metrics by
// their real names and labels, and the dashboard covers every metric family the hub exports.
func TestChartPromQLUsesTheHubsMetrics(t *testing.T) {
	families := chartHubMetricFamilies(t)
	labelsOf := map[string]map[string]bool{}
	for _, f := range families {
		ls := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = true
			}
		}
		labelsOf[f.GetName()] = ls
		if f.GetType() == dto.MetricType_HISTOGRAM {
			withLE := map[string]bool{"le": true}
			for l := range ls {
				withLE[l] = true
			}
			labelsOf[f.GetName()+"_bucket"] = withLE
			labelsOf[f.GetName()+"_count"] = ls
			labelsOf[f.GetName()+"_sum"] = ls
		}
	}
	queries := charttest.PromQL(t, hubChartDir, "5m", charttest.PrometheusTestRules, charttest.HelmTemplate())
	used := map[string]bool{}
	for _, q := range queries {
		// The one expression about Prometheus's own series: the scrape of the ServiceMonitor's
		// job, which the Prometheus Operator names after the metrics Service, in its namespace
		// (charttest.PromQL renders release policyhub-hub in policyhub-system).
		if q.Source == "alert: PolicyhubMetricsDown" {
			const up = `up{job="policyhub-hub-metrics", namespace="policyhub-system"}`
			if q.Expr != up+" == 0 or absent("+up+")" {
				t.Errorf("%s: %q, want the ServiceMonitor's scrape down or absent", q.Source, q.Expr)
			}
			continue
		}
		names := metricNameRE.FindAllString(q.Expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q uses no policyhub metric", q.Source, q.Expr)
		}
		known := map[string]bool{"le": true}
		for _, n := range names {
			ls, ok := labelsOf[n]
			if !ok {
				t.Errorf("%s: %q uses %s, which the hub does not export", q.Source, q.Expr, n)
				continue
			}
			used[strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count")] = true
			for l := range ls {
				known[l] = true
			}
		}
		for _, sel := range selectorRE.FindAllStringSubmatch(q.Expr, -1) {
			metric := sel[0][:strings.IndexByte(sel[0], '{')]
			for _, m := range matcherRE.FindAllStringSubmatch(sel[1], -1) {
				if !labelsOf[metric][m[1]] {
					t.Errorf("%s: %q matches label %s, which %s does not have", q.Source, q.Expr, m[1], metric)
				}
			}
		}
		for _, by := range byClauseRE.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range strings.Split(by[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !known[l] {
					t.Errorf("%s: %q aggregates by %s, which none of its metrics has", q.Source, q.Expr, l)
				}
			}
		}
		if strings.Contains(q.Expr, "$") {
			t.Errorf("%s: %q still holds a Grafana variable", q.Source, q.Expr)
		}
	}
	for _, f := range families {
		if !used[f.GetName()] {
			t.Errorf("no dashboard panel or alert uses %s", f.GetName())
		}
	}
	if n := len(queries); n < 20 {
		t.Errorf("only %d queries", n)
	}
}

// metricNameRE and friends pick the metric names and label names out of PromQL.
var (
	metricNameRE = regexp.MustCompile(`\bpolicyhub_[a-z_]+`)
	byClauseRE   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcherRE    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	selectorRE   = regexp.MustCompile(`policyhub_[a-z_]+\{([^}]*)\}`)
)

// chartHubMetricFamilies are the metric families policyhub-hub exports, each with a series.
func chartHubMetricFamilies(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	now := time.Now()
	sync := metrics.NewSync(reg)
	sync.Observe(metrics.Pass{Cluster: "cluster-1", Duration: time.Second, Declarations: []metrics.PassDeclaration{
		{Phase: policyhubv1.ClusterPhaseConflict, Actions: policyhubv1.ActionCounts{Created: 1, Conflict: 1}},
	}})
	compliance := metrics.NewCompliance(reg, func() time.Time { return now }, nil)
	compliance.Set("cluster-1", &policyhubv1.PolicyReportSummary{
		Spec: policyhubv1.PolicyReportSummarySpec{
			Cluster: "cluster-1", GeneratedAt: &metav1.Time{Time: now}, Totals: policyhubv1.ResultCounts{Fail: 1}, Blocked: 1,
			Engine: policyhubv1.EngineInfo{Kyverno: &policyhubv1.KyvernoFacts{Version: "v1.19.1"}, Legacy: &policyhubv1.LegacyInventory{
				Counts: []policyhubv1.LegacyCount{{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: 1}}}},
			Policies:     []policyhubv1.PolicySummary{{Name: "p", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 1}, Blocked: 1}},
			Applications: []policyhubv1.ApplicationSummary{{Namespace: "shop", Name: "shop", Policy: "p", Results: policyhubv1.ResultCounts{Fail: 1}}},
		},
		Status: policyhubv1.PolicyReportSummaryStatus{ObservedTime: &metav1.MicroTime{Time: now}},
	})
	metrics.NewRollout(reg).Set("p", &policyhubv1.RolloutStatus{Revision: "r", Waves: []policyhubv1.WaveStatus{
		{Name: "w", Phase: policyhubv1.WaveWaiting, Since: &metav1.Time{Time: now}, Fail: 1, Blocked: 1},
	}})
	exception := &policyhubv1.FleetPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "e"}}
	exception.Spec.ExpiresAt = metav1.NewTime(now.Add(time.Hour))
	exception.Status = policyhubv1.FleetPolicyExceptionStatus{State: policyhubv1.ExceptionActive, Policy: "ClusterPolicy/p", Exempted: 1}
	metrics.NewExceptions(reg).Set(exception)
	metrics.NewReplica(reg).Set(1, 1, 1, 1, 0)
	metrics.NewPhases(reg, func() []metrics.ClusterPhases {
		return []metrics.ClusterPhases{{Cluster: "cluster-1", Phases: map[policyhubv1.ClusterPhase]int{policyhubv1.ClusterPhaseNotEnforced: 1}, InForce: 1}}
	})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) < 10 {
		t.Fatalf("only %d metric families", len(families))
	}
	return families
}
