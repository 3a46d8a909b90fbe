package metrics

import (
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// Compliance exposes the clusters' policy results, from the summaries the hub accepted. It is a
// collector over the latest summary of each cluster rather than a set of gauges: a series exists
// exactly as long as its cluster, policy or application is in a summary, so nothing is left
// behind when one goes away.
type Compliance struct {
	now func() time.Time

	mu        sync.Mutex
	summaries map[string]*policyhubv1.PolicyReportSummary

	policyResults, policyBlocked, appResults, clusterResults, clusterBlocked, age *prometheus.Desc
}

// NewCompliance creates the compliance metrics and registers them with reg. now is the clock the
// summary age is measured with.
func NewCompliance(reg prometheus.Registerer, now func() time.Time) *Compliance {
	c := &Compliance{
		now:       now,
		summaries: map[string]*policyhubv1.PolicyReportSummary{},
		policyResults: prometheus.NewDesc("policyhub_policy_results",
			"Policy report results in a cluster, by policy, result (pass, fail, warn, error, skip), severity and category.",
			[]string{"cluster", "policy_namespace", "policy", "kind", "result", "severity", "category"}, nil),
		policyBlocked: prometheus.NewDesc("policyhub_policy_blocked_admissions",
			"Admissions a policy refused in a cluster, from Kyverno's Events still in the cluster.",
			[]string{"cluster", "policy_namespace", "policy", "kind"}, nil),
		appResults: prometheus.NewDesc("policyhub_application_results",
			"Policy report results of an application's resources in a cluster, by result.",
			[]string{"cluster", "app_namespace", "application", "result"}, nil),
		clusterResults: prometheus.NewDesc("policyhub_cluster_results",
			"Policy report results in a cluster, by result.",
			[]string{"cluster", "result"}, nil),
		clusterBlocked: prometheus.NewDesc("policyhub_cluster_blocked_admissions",
			"Admissions Kyverno refused in a cluster, from its Events still in the cluster.",
			[]string{"cluster"}, nil),
		age: prometheus.NewDesc("policyhub_summary_age_seconds",
			"Seconds since the hub saw the cluster's latest summary, by the hub's clock (agents push one every heartbeat).",
			[]string{"cluster"}, nil),
	}
	reg.MustRegister(c)
	return c
}

// Set records the latest accepted summary of a cluster. It keeps a copy of what the metrics
// read: the spec, and when the hub saw it.
func (c *Compliance) Set(cluster string, s *policyhubv1.PolicyReportSummary) {
	kept := &policyhubv1.PolicyReportSummary{Spec: *s.Spec.DeepCopy()}
	kept.Generation = s.Generation
	kept.Status.ObservedGeneration = s.Status.ObservedGeneration
	kept.Status.ObservedTime = s.Status.ObservedTime.DeepCopy()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.summaries[cluster] = kept
}

// Forget removes a cluster's series (its summary was deleted or refused).
func (c *Compliance) Forget(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.summaries, cluster)
}

// Describe implements prometheus.Collector.
func (c *Compliance) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.policyResults, c.policyBlocked, c.appResults, c.clusterResults, c.clusterBlocked, c.age} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Compliance) Collect(ch chan<- prometheus.Metric) {
	// A scrape of a thousand clusters' series takes a while: it works on a snapshot, so the
	// summaries arriving meanwhile are not held up. Stored summaries are never changed, only
	// replaced.
	c.mu.Lock()
	summaries := maps.Clone(c.summaries)
	c.mu.Unlock()
	now := c.now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for cluster, s := range summaries {
		gauge(c.age, aggregate.Age(s, now).Seconds(), cluster)
		gauge(c.clusterBlocked, float64(s.Spec.Blocked), cluster)
		for result, n := range byResult(s.Spec.Totals) {
			gauge(c.clusterResults, n, cluster, result)
		}
		for _, p := range s.Spec.Policies {
			for result, n := range byResult(p.Results) {
				gauge(c.policyResults, n, cluster, p.Namespace, p.Name, p.Kind, result, p.Severity, p.Category)
			}
			gauge(c.policyBlocked, float64(p.Blocked), cluster, p.Namespace, p.Name, p.Kind)
		}
		// A summary has one entry per application and policy; the metric is per application.
		type app struct{ namespace, name string }
		apps := map[app]policyhubv1.ResultCounts{}
		for _, a := range s.Spec.Applications {
			counts := apps[app{a.Namespace, a.Name}]
			aggregate.Add(&counts, a.Results)
			apps[app{a.Namespace, a.Name}] = counts
		}
		for a, counts := range apps {
			for result, n := range byResult(counts) {
				gauge(c.appResults, n, cluster, a.namespace, a.name, result)
			}
		}
	}
}

// byResult spells out every result, zeros included: a violation that was fixed reads 0 instead
// of vanishing, which is what alerts and dashboards expect.
func byResult(r policyhubv1.ResultCounts) map[string]float64 {
	return map[string]float64{
		"pass": float64(r.Pass), "fail": float64(r.Fail), "warn": float64(r.Warn),
		"error": float64(r.Error), "skip": float64(r.Skip),
	}
}
