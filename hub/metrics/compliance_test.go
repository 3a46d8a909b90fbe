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

func TestComplianceMetrics(t *testing.T) {
	generated := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return generated.Add(25 * time.Second) })
	c.Set("cluster-1", seenAt(generated, policyhubv1.PolicyReportSummarySpec{
		Cluster: "cluster-1", GeneratedAt: &metav1.Time{Time: generated.Add(time.Hour)}, // a clock an hour ahead
		Totals: policyhubv1.ResultCounts{Pass: 4, Fail: 2}, Blocked: 1,
		Policies: []policyhubv1.PolicySummary{
			{Name: "require-labels", Kind: "ClusterPolicy", Severity: "medium", Category: "Best Practices", Results: policyhubv1.ResultCounts{Pass: 4, Fail: 2}, Blocked: 1},
		},
		Applications: []policyhubv1.ApplicationSummary{
			{Namespace: "shop", Name: "shop", Policy: "require-labels", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
			{Namespace: "shop", Name: "shop", Policy: "no-latest", Results: policyhubv1.ResultCounts{Pass: 3}},
		},
	}))
	c.Set("cluster-2", seenAt(generated.Add(-time.Minute), policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-2", GeneratedAt: &metav1.Time{Time: generated}}))

	want := `
# HELP policyhub_application_results Policy report results of an application's resources in a cluster, by result.
# TYPE policyhub_application_results gauge
policyhub_application_results{app_namespace="shop",application="shop",cluster="cluster-1",result="error"} 0
policyhub_application_results{app_namespace="shop",application="shop",cluster="cluster-1",result="fail"} 2
policyhub_application_results{app_namespace="shop",application="shop",cluster="cluster-1",result="pass"} 4
policyhub_application_results{app_namespace="shop",application="shop",cluster="cluster-1",result="skip"} 0
policyhub_application_results{app_namespace="shop",application="shop",cluster="cluster-1",result="warn"} 0
# HELP policyhub_policy_results Policy report results in a cluster, by policy, result (pass, fail, warn, error, skip), severity and category.
# TYPE policyhub_policy_results gauge
policyhub_policy_results{category="Best Practices",cluster="cluster-1",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="error",severity="medium"} 0
policyhub_policy_results{category="Best Practices",cluster="cluster-1",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="fail",severity="medium"} 2
policyhub_policy_results{category="Best Practices",cluster="cluster-1",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="pass",severity="medium"} 4
policyhub_policy_results{category="Best Practices",cluster="cluster-1",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="skip",severity="medium"} 0
policyhub_policy_results{category="Best Practices",cluster="cluster-1",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="warn",severity="medium"} 0
# HELP policyhub_summary_age_seconds Seconds since the hub saw the cluster's latest summary, by the hub's clock (agents push one every heartbeat).
# TYPE policyhub_summary_age_seconds gauge
policyhub_summary_age_seconds{cluster="cluster-1"} 25
policyhub_summary_age_seconds{cluster="cluster-2"} 85
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_application_results", "policyhub_policy_results", "policyhub_summary_age_seconds"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(singleSeries(t, reg, "policyhub_cluster_blocked_admissions", "cluster-1")); got != 1 {
		t.Errorf("cluster-1 blocked admissions %v, want 1", got)
	}

	// A cluster that goes away takes every series of it along.
	c.Forget("cluster-1")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == "cluster-1" {
					t.Errorf("%s still has a cluster-1 series after Forget", f.GetName())
				}
			}
		}
	}
}

// seenAt is a summary the hub saw at hub time seen.
func seenAt(seen time.Time, spec policyhubv1.PolicyReportSummarySpec) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{Spec: spec}
	s.Generation, s.Status.ObservedGeneration = 2, 2
	s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
	return s
}

// singleSeries returns a collector of the one series of metric name for cluster.
func singleSeries(t *testing.T, reg *prometheus.Registry, name, cluster string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no %s series for %s", name, cluster)
	return nil
}
