package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// Compliance exposes the clusters' policy results, from the summaries the hub accepted. It is a
// collector over the latest summary of each cluster rather than a set of gauges: a series exists
// exactly as long as its cluster, policy or application is in a summary, so nothing is left
// behind when one goes away.
type Compliance struct {
	now   func() time.Time
	heard func(cluster string) time.Time

	mu        sync.Mutex
	summaries map[string]*policyhubv1.PolicyReportSummary

	policyResults, policyBlocked, appResults, clusterResults, clusterBlocked, age *prometheus.Desc
	legacyObjects, kyvernoInfo, engineInfo                                        *prometheus.Desc
}

// NewCompliance creates the compliance metrics and registers them with reg. now is the clock the
// summary age is measured with; heard says when the hub last saw a cluster's agent renew its
// Lease (nil: only summaries count).
func NewCompliance(reg prometheus.Registerer, now func() time.Time, heard func(cluster string) time.Time) *Compliance {
	if heard == nil {
		heard = func(string) time.Time { return time.Time{} }
	}
	c := &Compliance{
		now:       now,
		heard:     heard,
		summaries: map[string]*policyhubv1.PolicyReportSummary{},
		policyResults: prometheus.NewDesc("policyhub_policy_results",
			"Policy report results in a cluster, by policy, engine (Kyverno, Kubernetes, Gatekeeper), result (pass, fail, warn, error, skip), severity and category; a result kind the engine does not count (Gatekeeper counts only fail) has no series.",
			[]string{"cluster", "policy_namespace", "policy", "kind", "engine", "result", "severity", "category"}, nil),
		policyBlocked: prometheus.NewDesc("policyhub_policy_blocked_admissions",
			"Admissions a policy refused in a cluster, by engine: Kyverno's from its Events still in the cluster, Kubernetes admission policies' from the API server's metrics where the agent may read them.",
			[]string{"cluster", "policy_namespace", "policy", "kind", "engine"}, nil),
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
			"Seconds since the hub last heard from the cluster's agent, by the hub's clock: its Lease renewed (every heartbeat) or a new summary.",
			[]string{"cluster"}, nil),
		legacyObjects: prometheus.NewDesc("policyhub_cluster_legacy_objects",
			"Kyverno legacy objects (kyverno.io ClusterPolicy, Policy, ClusterCleanupPolicy, CleanupPolicy, PolicyException) in a cluster, by kind and owner (policyhub, other), as its agent reported them; every kind and owner, zeros included, for a cluster whose agent reports an inventory, none otherwise. Kyverno 1.20's Helm upgrade refuses while any exists.",
			[]string{"cluster", "kind", "owner"}, nil),
		engineInfo: prometheus.NewDesc("policyhub_cluster_engine_info",
			"1 for each policy engine a cluster runs, as its agent reported them (Kyverno, Kubernetes: the API server's own admission policies, Gatekeeper), with the engine's version where the agent could tell it.",
			[]string{"cluster", "engine", "version"}, nil),
		kyvernoInfo: prometheus.NewDesc("policyhub_kyverno_info",
			"1 for each cluster with a summary: its Kyverno's version as its agent read it (\"\" when the agent could not tell) and whether that version still enforces the legacy kinds (yes, no, unknown).",
			[]string{"cluster", "version", "enforces_legacy"}, nil),
	}
	reg.MustRegister(c)
	return c
}

// Set records the latest accepted summary of a cluster. It keeps a copy of what the metrics
// read: the spec, and when the hub saw it.
func (c *Compliance) Set(cluster string, s *policyhubv1.PolicyReportSummary) {
	c.mu.Lock()
	if had := c.summaries[cluster]; had != nil && had.Generation == s.Generation &&
		had.Status.ObservedGeneration == s.Status.ObservedGeneration && had.Status.ObservedTime.Equal(s.Status.ObservedTime) {
		// The same summary, seen at the same time (a Lease renewal woke its reconcile): at a
		// thousand agents renewing, copying every spec again would be most of the hub's work.
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
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
	for _, d := range []*prometheus.Desc{c.policyResults, c.policyBlocked, c.appResults, c.clusterResults, c.clusterBlocked, c.age, c.legacyObjects, c.kyvernoInfo, c.engineInfo} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Whatever a summary holds (an older CRD may have let
// anything through), a scrape never fails: one series per label set (a registry refuses the
// whole scrape otherwise, every cluster's series with it), label values cut and made valid
// UTF-8, and no negative count.
func (c *Compliance) Collect(ch chan<- prometheus.Metric) {
	// A scrape of a thousand clusters' series takes a while: it works on a snapshot, so the
	// summaries arriving meanwhile are not held up. Stored summaries are never changed, only
	// replaced.
	c.mu.Lock()
	summaries := maps.Clone(c.summaries)
	c.mu.Unlock()
	now := c.now()
	// In order: when two clusters' names cut to one label value, the first keeps it.
	seen := map[string]bool{}
	for _, cluster := range slices.Sorted(maps.Keys(summaries)) {
		name := labelValue(cluster)
		if seen[name] {
			continue
		}
		seen[name] = true
		c.collectCluster(ch, name, summaries[cluster], c.heard(cluster), now)
	}
}

// collectCluster sends one cluster's series, cluster being its label value.
// heard is when its agent last renewed its Lease.
func (c *Compliance) collectCluster(ch chan<- prometheus.Metric, cluster string, s *policyhubv1.PolicyReportSummary, heard, now time.Time) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.age, aggregate.Age(s, heard, now).Seconds(), cluster)
	gauge(c.clusterBlocked, count(s.Spec.Blocked), cluster)
	c.collectEngine(ch, cluster, &s.Spec.Engine)
	reported := &s.Spec.Engine
	for result, n := range byResult(s.Spec.Totals, reported) {
		gauge(c.clusterResults, n, cluster, result)
	}
	// One entry per policy: a policy listed twice counts once, as its first entry says. The
	// engine is one of three values (any other reads as Kyverno): no new series per policy.
	type policy struct{ namespace, name, kind string }
	policies := make(map[policy]bool, len(s.Spec.Policies))
	for i := range s.Spec.Policies {
		p := &s.Spec.Policies[i]
		key := policy{labelValue(p.Namespace), labelValue(p.Name), labelValue(p.Kind)}
		if policies[key] {
			continue
		}
		policies[key] = true
		severity, category := labelValue(p.Severity), labelValue(p.Category)
		engine := knownEngine(p.Engine)
		for result, n := range byEngineResult(p.Results, engine, reported) {
			gauge(c.policyResults, n, cluster, key.namespace, key.name, key.kind, string(engine), result, severity, category)
		}
		gauge(c.policyBlocked, count(p.Blocked), cluster, key.namespace, key.name, key.kind, string(engine))
	}
	// A summary has one entry per application and policy; the metric is per application.
	type app struct{ namespace, name string }
	apps := map[app]policyhubv1.ResultCounts{}
	for i := range s.Spec.Applications {
		a := &s.Spec.Applications[i]
		key := app{labelValue(a.Namespace), labelValue(a.Name)}
		counts := apps[key]
		aggregate.Add(&counts, a.Results)
		apps[key] = counts
	}
	for a, counts := range apps {
		for result, n := range byResult(counts, reported) {
			gauge(c.appResults, n, cluster, a.namespace, a.name, result)
		}
	}
}

// maxLabelValue bounds a label value in bytes: a Kubernetes name's length, so that no real
// policy or namespace name is cut, while a summary an older CRD let through cannot put
// megabytes into every scrape.
const maxLabelValue = 253

// labelValue is s as a label value: at most maxLabelValue bytes of valid UTF-8 (a registry
// refuses a scrape with an invalid label value).
func labelValue(s string) string {
	if len(s) <= maxLabelValue && utf8.ValidString(s) {
		return s
	}
	s = strings.ToValidUTF8(policyhubv1.CutUTF8(s, maxLabelValue), "\uFFFD")
	return policyhubv1.CutUTF8(s, maxLabelValue)
}

// count is a count as a gauge value; a negative one reads 0.
func count(n int64) float64 {
	return float64(max(n, 0))
}

// knownEngine is a summary entry's engine as a label value: one of PolicyEngines (none, or one
// an older CRD let through, reads as Kyverno), so the label has three values at most.
func knownEngine(e policyhubv1.PolicyEngine) policyhubv1.PolicyEngine {
	if slices.Contains(policyhubv1.PolicyEngines(), e) {
		return e
	}
	return policyhubv1.EngineKyverno
}

// byEngineResult is byResult for one policy of engine: only the result kinds its engine counts.
func byEngineResult(r policyhubv1.ResultCounts, engine policyhubv1.PolicyEngine, info *policyhubv1.EngineInfo) map[string]float64 {
	out := byResult(r, nil)
	for kind := range out {
		if !engine.ReportsResult(info, kind) {
			delete(out, kind)
		}
	}
	return out
}

// byResult spells out every result the cluster's Kyverno writes, zeros included: a violation
// that was fixed reads 0 instead of vanishing, which is what alerts and dashboards expect. A kind
// its Kyverno does not write (--allowedResults) has no series: unknown, never 0.
func byResult(r policyhubv1.ResultCounts, engine *policyhubv1.EngineInfo) map[string]float64 {
	out := map[string]float64{
		"pass": count(r.Pass), "fail": count(r.Fail), "warn": count(r.Warn),
		"error": count(r.Error), "skip": count(r.Skip),
	}
	for kind := range out {
		if !engine.ReportsResult(kind) {
			delete(out, kind)
		}
	}
	return out
}

// collectEngine sends a cluster's Kyverno facts: its version (one series), and its legacy
// objects by kind and owner (at most len(LegacyKinds) × 2 series, zeros included), when its
// agent reported them.
func (c *Compliance) collectEngine(ch chan<- prometheus.Metric, cluster string, e *policyhubv1.EngineInfo) {
	// Every cluster with a summary has its one series: one whose agent could not tell its
	// Kyverno's version shows as such (version "", unknown), not as missing.
	version := ""
	if k := e.Kyverno; k != nil {
		version = k.Version
	}
	enforces := "unknown"
	if yes, known := policyhubv1.KyvernoEnforcesLegacy(version); known {
		enforces = map[bool]string{true: "yes", false: "no"}[yes]
	}
	ch <- prometheus.MustNewConstMetric(c.kyvernoInfo, prometheus.GaugeValue, 1, cluster, labelValue(version), enforces)
	for _, engine := range policyhubv1.PolicyEngines() {
		if !slices.Contains(e.Engines, engine) {
			continue
		}
		v := ""
		switch engine {
		case policyhubv1.EngineKyverno:
			v = version
		case policyhubv1.EngineGatekeeper:
			if e.Gatekeeper != nil {
				v = e.Gatekeeper.Version
			}
		}
		ch <- prometheus.MustNewConstMetric(c.engineInfo, prometheus.GaugeValue, 1, cluster, string(engine), labelValue(v))
	}
	if e.Legacy == nil {
		return
	}
	// Only the known kinds and owners, each once: an older CRD may have let anything through.
	counts := map[policyhubv1.LegacyCount]int64{}
	for _, kind := range policyhubv1.LegacyKinds {
		for _, owner := range []policyhubv1.LegacyOwner{policyhubv1.LegacyOwnerPolicyhub, policyhubv1.LegacyOwnerOther} {
			counts[policyhubv1.LegacyCount{Kind: kind, Owner: owner}] = 0
		}
	}
	for _, n := range e.Legacy.Counts {
		key := policyhubv1.LegacyCount{Kind: n.Kind, Owner: n.Owner}
		if had, ok := counts[key]; ok {
			counts[key] = aggregate.AddCount(had, n.Count)
		}
	}
	for key, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.legacyObjects, prometheus.GaugeValue, count(n), cluster, key.Kind, string(key.Owner))
	}
}
