package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Whatever one cluster's summary holds, a scrape never fails, and the other cluster's series
// are there.
func FuzzMetricsExport(f *testing.F) {
	f.Add("hostile", "require-labels", "", "ClusterPolicy", "high", "Best Practices", "shop", int64(-1000), int64(-1), uint8(2))
	f.Add("cluster-2", "p\xff\xfe", "ns", "", "", "", "", int64(1<<62), int64(7), uint8(3))
	f.Add("", "", "", "", "\x00", "\xc3", "app\xff", int64(0), int64(0), uint8(1))
	f.Fuzz(func(t *testing.T, cluster, policy, namespace, kind, severity, category, app string, count, blocked int64, copies uint8) {
		if cluster == "honest" {
			cluster += "-not"
		}
		now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		reg := prometheus.NewRegistry()
		c := NewCompliance(reg, func() time.Time { return now }, nil)
		c.Set("honest", seenAt(now, policyhubv1.PolicyReportSummarySpec{
			Cluster:  "honest",
			Policies: []policyhubv1.PolicySummary{{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 2}}},
		}))
		spec := policyhubv1.PolicyReportSummarySpec{Cluster: cluster, Totals: policyhubv1.ResultCounts{Fail: count, Pass: -count}, Blocked: blocked}
		for i := range int(copies % 4) {
			spec.Policies = append(spec.Policies, policyhubv1.PolicySummary{
				Name: policy, Namespace: namespace, Kind: kind, Severity: severity + string(rune('0'+i)), Category: category,
				Results: policyhubv1.ResultCounts{Fail: count, Error: -count}, Blocked: blocked,
			})
			spec.Applications = append(spec.Applications, policyhubv1.ApplicationSummary{Namespace: namespace, Name: app, Policy: policy,
				Results: policyhubv1.ResultCounts{Fail: count}, Blocked: blocked})
		}
		c.Set(cluster, seenAt(now.Add(time.Duration(int32(count))*time.Second), spec))
		families, err := reg.Gather()
		if err != nil {
			t.Fatalf("a scrape failed: %v", err)
		}
		honest := 0.0
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if m.GetGauge().GetValue() < 0 {
					t.Fatalf("%s: negative value %v", f.GetName(), m.GetGauge().GetValue())
				}
				if f.GetName() == "policyhub_policy_results" && hasLabels(m.GetLabel(), "cluster", "honest", "result", "fail") {
					honest = m.GetGauge().GetValue()
				}
			}
		}
		if honest != 2 {
			t.Fatalf("the honest cluster's fail series reads %v, want 2", honest)
		}
	})
}
