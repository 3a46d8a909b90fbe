package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ClusterPhases counts one cluster's declarations by phase, and those in force there.
type ClusterPhases struct {
	Cluster string
	Phases  map[policyhubv1.ClusterPhase]int
	InForce int
}

// Phases exposes, per cluster, how many declarations are in each phase there and how many are
// in force: what the fleet is protected by. A declaration NotEnforced (its engine serves the kind
// but does not execute it) counts in its own phase and never in force. It is a collector over the
// workers' latest results, so a series lasts exactly as long as its cluster's worker.
type Phases struct {
	phases  func() []ClusterPhases
	byPhase *prometheus.Desc
	inForce *prometheus.Desc
}

// NewPhases creates the phase metrics over phases (the workers' counts) and registers them with reg.
func NewPhases(reg prometheus.Registerer, phases func() []ClusterPhases) *Phases {
	p := &Phases{
		phases: phases,
		byPhase: prometheus.NewDesc("policyhub_cluster_declarations",
			"Declarations wanted in a cluster, by their phase there (synced, dry_run, pending, lock_held, unsupported, not_enforced, conflict, failed).",
			[]string{"cluster", "phase"}, nil),
		inForce: prometheus.NewDesc("policyhub_cluster_declarations_in_force",
			"Declarations in force in a cluster: synced, and the engine reported them ready. Not enforced, failed or pending ones are not.",
			[]string{"cluster"}, nil),
	}
	reg.MustRegister(p)
	return p
}

// Describe implements prometheus.Collector.
func (p *Phases) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.byPhase
	ch <- p.inForce
}

// Collect implements prometheus.Collector.
func (p *Phases) Collect(ch chan<- prometheus.Metric) {
	for _, c := range p.phases() {
		for phase, n := range c.Phases {
			ch <- prometheus.MustNewConstMetric(p.byPhase, prometheus.GaugeValue, float64(n), c.Cluster, reason(phase))
		}
		ch <- prometheus.MustNewConstMetric(p.inForce, prometheus.GaugeValue, float64(c.InForce), c.Cluster)
	}
}
