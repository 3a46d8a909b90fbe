package controllers

import (
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/work"
)

// syncPass is a worker's pass as the sync metrics count it (they take plain values).
func syncPass(r *work.ClusterResult) metrics.Pass {
	p := metrics.Pass{Cluster: r.Cluster, Duration: r.Duration, Unreachable: r.Err != nil,
		Declarations: make([]metrics.PassDeclaration, len(r.Declarations))}
	for i, d := range r.Declarations {
		p.Declarations[i] = metrics.PassDeclaration{Actions: d.Actions, Phase: d.Phase}
	}
	return p
}

// clusterPhases are the workers' phase counts as the phase metrics take them.
func clusterPhases(counts []work.ClusterPhases) []metrics.ClusterPhases {
	out := make([]metrics.ClusterPhases, len(counts))
	for i, c := range counts {
		out[i] = metrics.ClusterPhases{Cluster: c.Cluster, Phases: c.Phases, InForce: c.InForce}
	}
	return out
}
