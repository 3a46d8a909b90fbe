package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Pass is one pass over one cluster as the sync metrics count it: plain values, so the metrics
// know nothing of the per-cluster engine that made it.
type Pass struct {
	Cluster  string
	Duration time.Duration
	// Unreachable: the cluster could not be read at all.
	Unreachable bool
	// Declarations are what the pass did for each declaration, and the phase it left it in.
	Declarations []PassDeclaration
}

// PassDeclaration is one declaration's part of a Pass.
type PassDeclaration struct {
	Actions policyhubv1.ActionCounts
	Phase   policyhubv1.ClusterPhase
}

// Sync holds the metrics of syncing declarations into clusters.
type Sync struct {
	operations *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	errors     *prometheus.CounterVec
	reachable  *prometheus.GaugeVec
}

// NewSync creates the sync metrics and registers them with reg.
func NewSync(reg prometheus.Registerer) *Sync {
	m := &Sync{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "policyhub_sync_operations_total",
			Help: "Objects handled by syncs, by cluster and action (created, updated, unchanged, deleted, conflict, failed).",
		}, []string{"cluster", "action"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "policyhub_sync_duration_seconds",
			Help:    "Duration of one sync of one cluster.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"cluster"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "policyhub_sync_errors_total",
			Help: "Declarations not synced in a cluster, by reason (failed, conflict, unsupported, not_enforced, lock_held, unreachable).",
		}, []string{"cluster", "reason"}),
		reachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "policyhub_cluster_reachable",
			Help: "1 when the last sync could read the cluster through the gateway, 0 when it could not.",
		}, []string{"cluster"}),
	}
	reg.MustRegister(m.operations, m.duration, m.errors, m.reachable)
	return m
}

// Observe records one cluster sync.
func (m *Sync) Observe(res Pass) {
	c := res.Cluster
	m.duration.WithLabelValues(c).Observe(res.Duration.Seconds())
	if res.Unreachable {
		m.reachable.WithLabelValues(c).Set(0)
		m.errors.WithLabelValues(c, "unreachable").Inc()
		return
	}
	m.reachable.WithLabelValues(c).Set(1)
	for _, d := range res.Declarations {
		a := d.Actions
		for action, n := range map[string]int32{
			"created": a.Created, "updated": a.Updated, "unchanged": a.Unchanged,
			"deleted": a.Deleted, "conflict": a.Conflict, "failed": a.Failed,
		} {
			if n > 0 {
				m.operations.WithLabelValues(c, action).Add(float64(n))
			}
		}
		if d.Phase.Failing() {
			m.errors.WithLabelValues(c, reason(d.Phase)).Inc()
		}
	}
}

// ForgetCluster removes a cluster's series (it left the inventory).
func (m *Sync) ForgetCluster(cluster string) {
	labels := prometheus.Labels{"cluster": cluster}
	m.operations.DeletePartialMatch(labels)
	m.duration.DeletePartialMatch(labels)
	m.errors.DeletePartialMatch(labels)
	m.reachable.DeletePartialMatch(labels)
}

// reason turns a phase into a metric label value: LockHeld → lock_held.
func reason(p policyhubv1.ClusterPhase) string {
	var b strings.Builder
	for i, r := range string(p) {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

// Renders counts the declarations placed and rendered, by kind: the dispatch half of a
// declaration's reconcile. It moves with what renderings depend on (specs, the inventory,
// placements, grants, rollout steps), never with the agents' results or the workers' outcomes,
// which the status half takes in without rendering again.
type Renders struct {
	total *prometheus.CounterVec
}

// NewRenders creates the renders counter and registers it with reg.
func NewRenders(reg prometheus.Registerer) *Renders {
	m := &Renders{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policyhub_declaration_renders_total",
		Help: "Declarations placed and rendered, by kind (FleetPolicy, ApplicationPolicy).",
	}, []string{"kind"})}
	reg.MustRegister(m.total)
	return m
}

// Rendered records one rendering of a declaration of kind; a nil Renders records nothing.
func (m *Renders) Rendered(kind string) {
	if m != nil {
		m.total.WithLabelValues(kind).Inc()
	}
}
