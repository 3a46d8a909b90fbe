package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestComplianceMetrics(t *testing.T) {
	generated := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return generated.Add(25 * time.Second) }, nil)
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
# HELP policyhub_policy_results Policy report results in a cluster, by policy, engine (Kyverno, Kubernetes, Gatekeeper), result (pass, fail, warn, error, skip), severity and category; a result kind the engine does not count (Gatekeeper counts only fail) has no series.
# TYPE policyhub_policy_results gauge
policyhub_policy_results{category="Best Practices",cluster="cluster-1",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="error",severity="medium"} 0
policyhub_policy_results{category="Best Practices",cluster="cluster-1",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="fail",severity="medium"} 2
policyhub_policy_results{category="Best Practices",cluster="cluster-1",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="pass",severity="medium"} 4
policyhub_policy_results{category="Best Practices",cluster="cluster-1",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="skip",severity="medium"} 0
policyhub_policy_results{category="Best Practices",cluster="cluster-1",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="warn",severity="medium"} 0
# HELP policyhub_summary_age_seconds Seconds since the hub last heard from the cluster's agent, by the hub's clock: its Lease renewed (every heartbeat) or a new summary.
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

// One cluster's summary, whatever it holds, cannot make a scrape fail: a policy listed twice
// (which a registry refuses as duplicate series, failing every scrape of the whole fleet),
// negative counts, overlong and invalid label values. The other cluster's series stay intact.
func TestComplianceSurvivesAHostileSummary(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return now }, nil)
	c.Set("honest", seenAt(now, policyhubv1.PolicyReportSummarySpec{
		Cluster:  "honest",
		Totals:   policyhubv1.ResultCounts{Fail: 2},
		Policies: []policyhubv1.PolicySummary{{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 2}}},
	}))
	long := strings.Repeat("x", 10000)
	dup := policyhubv1.PolicySummary{Name: "require-labels", Kind: "ClusterPolicy", Severity: "high", Results: policyhubv1.ResultCounts{Fail: 1}}
	c.Set("hostile", seenAt(now, policyhubv1.PolicyReportSummarySpec{
		Cluster: "hostile",
		Totals:  policyhubv1.ResultCounts{Fail: -1000},
		Blocked: -3,
		Policies: []policyhubv1.PolicySummary{
			dup, dup,
			{Name: "require-labels", Kind: "ClusterPolicy", Severity: "low", Results: policyhubv1.ResultCounts{Fail: 9}}, // same key, other labels
			{Name: long + "a", Kind: "\xff\xfe", Category: long},
			{Name: long + "b", Kind: "\xff\xfe", Category: long}, // cut to the same label value as the one before
			{Name: "negative", Results: policyhubv1.ResultCounts{Pass: -1, Fail: -1000}, Blocked: -1},
		},
		Applications: []policyhubv1.ApplicationSummary{
			{Namespace: "shop", Name: "shop", Policy: "a", Results: policyhubv1.ResultCounts{Fail: -1000}},
			{Namespace: "shop", Name: "shop", Policy: "a", Results: policyhubv1.ResultCounts{Fail: 1}},
			{Namespace: "shop", Name: long + "\xff", Policy: "a"},
		},
	}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("a scrape failed: %v", err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if v := m.GetGauge().GetValue(); v < 0 {
				t.Errorf("%s %v: negative value %v", f.GetName(), m.GetLabel(), v)
			}
			for _, l := range m.GetLabel() {
				if len(l.GetValue()) > maxLabelValue {
					t.Errorf("%s: label %s of %d bytes", f.GetName(), l.GetName(), len(l.GetValue()))
				}
			}
		}
	}
	if got := testutil.ToFloat64(singleSeries(t, reg, "policyhub_cluster_blocked_admissions", "hostile")); got != 0 {
		t.Errorf("hostile blocked admissions %v, want 0", got)
	}
	want := `
# HELP policyhub_policy_results Policy report results in a cluster, by policy, engine (Kyverno, Kubernetes, Gatekeeper), result (pass, fail, warn, error, skip), severity and category; a result kind the engine does not count (Gatekeeper counts only fail) has no series.
# TYPE policyhub_policy_results gauge
policyhub_policy_results{category="",cluster="honest",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="error",severity=""} 0
policyhub_policy_results{category="",cluster="honest",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="fail",severity=""} 2
policyhub_policy_results{category="",cluster="honest",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="pass",severity=""} 0
policyhub_policy_results{category="",cluster="honest",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="skip",severity=""} 0
policyhub_policy_results{category="",cluster="honest",engine="Kyverno",kind="ClusterPolicy",policy="require-labels",policy_namespace="",result="warn",severity=""} 0
`
	if err := testutil.GatherAndCompare(honestOnly{reg}, strings.NewReader(want), "policyhub_policy_results"); err != nil {
		t.Error(err)
	}
	// The hostile cluster's policy counts once, as its first entry says.
	if err := testutil.GatherAndCompare(hostilePolicy{reg}, strings.NewReader(strings.NewReplacer(
		`category="",cluster="honest"`, `category="",cluster="hostile"`, `severity=""} 0`, `severity="high"} 0`,
		`severity=""} 2`, `severity="high"} 1`).Replace(want)), "policyhub_policy_results"); err != nil {
		t.Error(err)
	}
}

// honestOnly and hostilePolicy gather the series of one cluster (and one policy).
type honestOnly struct{ prometheus.Gatherer }

func (g honestOnly) Gather() ([]*dto.MetricFamily, error) {
	return filterSeries(g.Gatherer, map[string]string{"cluster": "honest"})
}

type hostilePolicy struct{ prometheus.Gatherer }

func (g hostilePolicy) Gather() ([]*dto.MetricFamily, error) {
	return filterSeries(g.Gatherer, map[string]string{"cluster": "hostile", "policy": "require-labels"})
}

// filterSeries gathers g's series whose labels include want.
func filterSeries(g prometheus.Gatherer, want map[string]string) ([]*dto.MetricFamily, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		f.Metric = slices.DeleteFunc(f.Metric, func(m *dto.Metric) bool {
			found := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					found++
				}
			}
			return found != len(want)
		})
	}
	return families, nil
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

// hasLabels says whether labels include each name/value pair of want.
func hasLabels(labels []*dto.LabelPair, want ...string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if !slices.ContainsFunc(labels, func(l *dto.LabelPair) bool { return l.GetName() == want[i] && l.GetValue() == want[i+1] }) {
			return false
		}
	}
	return true
}

// A quiet agent renews its Lease and pushes nothing: the age counts from the renewal the hub saw,
// not from the summary, so an unchanged cluster does not look silent.
func TestComplianceAgeCountsLeaseRenewals(t *testing.T) {
	seen := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := seen.Add(10 * time.Minute)
	renewed := map[string]time.Time{"quiet": now.Add(-20 * time.Second)}
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return now }, func(cluster string) time.Time { return renewed[cluster] })
	c.Set("quiet", seenAt(seen, policyhubv1.PolicyReportSummarySpec{Cluster: "quiet", GeneratedAt: &metav1.Time{Time: seen}}))
	c.Set("silent", seenAt(seen, policyhubv1.PolicyReportSummarySpec{Cluster: "silent", GeneratedAt: &metav1.Time{Time: seen}}))
	want := `
# HELP policyhub_summary_age_seconds Seconds since the hub last heard from the cluster's agent, by the hub's clock: its Lease renewed (every heartbeat) or a new summary.
# TYPE policyhub_summary_age_seconds gauge
policyhub_summary_age_seconds{cluster="quiet"} 20
policyhub_summary_age_seconds{cluster="silent"} 600
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "policyhub_summary_age_seconds"); err != nil {
		t.Error(err)
	}
}

// A summary set again unchanged (same generation, seen at the same time: its agent's Lease
// renewal woke the summary's reconcile) keeps the copy already held; a new generation replaces it.
func TestComplianceSetKeepsAnUnchangedSummary(t *testing.T) {
	seen := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	c := NewCompliance(reg, func() time.Time { return seen }, nil)
	summary := func(generation int64, fail int64) *policyhubv1.PolicyReportSummary {
		s := seenAt(seen, policyhubv1.PolicyReportSummarySpec{Cluster: "c1", GeneratedAt: &metav1.Time{Time: seen},
			Totals: policyhubv1.ResultCounts{Fail: fail}})
		s.Generation, s.Status.ObservedGeneration = generation, generation
		return s
	}
	first := summary(1, 1)
	c.Set("c1", first)
	held := c.summaries["c1"]
	c.Set("c1", summary(1, 1))
	if c.summaries["c1"] != held {
		t.Error("an unchanged summary was copied again")
	}
	c.Set("c1", summary(2, 5))
	if got := c.summaries["c1"]; got == held || got.Spec.Totals.Fail != 5 {
		t.Errorf("a new generation was not taken: %+v", got.Spec.Totals)
	}
}
