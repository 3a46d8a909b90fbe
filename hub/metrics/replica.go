package metrics

import "github.com/prometheus/client_golang/prometheus"

// Replica is this hub replica's share of the fleet, when the replicas share it: the clusters it
// works, the clusters it sees in the fleet, the live replicas, and the clusters handed over. Each
// replica exports its own; Prometheus tells them apart by their target labels. A cluster no
// replica works shows as sum(policyhub_replica_clusters) below max(policyhub_replica_fleet_clusters).
type Replica struct {
	clusters, fleet, live prometheus.Gauge
	handovers             *prometheus.CounterVec
}

// NewReplica creates the replica metrics and registers them with reg.
func NewReplica(reg prometheus.Registerer) *Replica {
	m := &Replica{
		clusters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "policyhub_replica_clusters",
			Help: "Clusters this hub replica works (its share of the fleet)."}),
		fleet: prometheus.NewGauge(prometheus.GaugeOpts{Name: "policyhub_replica_fleet_clusters",
			Help: "Clusters in the fleet (cluster-gateway's credential Secrets) as this replica sees them."}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{Name: "policyhub_replica_live_replicas",
			Help: "Hub replicas this replica sees live (their Leases renewed)."}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyhub_replica_handovers_total",
			Help: "Clusters handed over between replicas: direction in (this replica took them) or out (it let them go)."}, []string{"direction"}),
	}
	reg.MustRegister(m.clusters, m.fleet, m.live, m.handovers)
	m.handovers.WithLabelValues("in")
	m.handovers.WithLabelValues("out")
	return m
}

// Set records a new share: owned clusters of fleet, live replicas, and how many clusters came in
// and went out with it.
func (m *Replica) Set(owned, fleet, live, in, out int) {
	m.clusters.Set(float64(owned))
	m.fleet.Set(float64(fleet))
	m.live.Set(float64(live))
	m.handovers.WithLabelValues("in").Add(float64(in))
	m.handovers.WithLabelValues("out").Add(float64(out))
}
