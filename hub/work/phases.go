package work

import (
	"sort"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ClusterPhases counts the declarations wanted in one cluster by their latest phase there.
type ClusterPhases struct {
	Cluster string
	// Phases counts the declarations with a result by its phase (those without one yet are Pending).
	Phases map[policyhubv1.ClusterPhase]int
	// InForce counts those in force: Synced, and Kyverno reported their policies ready.
	InForce int
}

// Phases counts, for every cluster with a worker, its declarations by phase and those in force:
// bounded by the phases, whatever the declarations.
func (ws *Workers) Phases() []ClusterPhases {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]ClusterPhases, 0, len(ws.workers))
	for name, w := range ws.workers {
		c := ClusterPhases{Cluster: name, Phases: map[policyhubv1.ClusterPhase]int{}}
		for source := range w.wants {
			r, ok := w.results[source]
			if !ok {
				c.Phases[policyhubv1.ClusterPhasePending]++
				continue
			}
			c.Phases[r.Phase]++
			if r.Phase == policyhubv1.ClusterPhaseSynced && r.InForce != nil && *r.InForce {
				c.InForce++
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster < out[j].Cluster })
	return out
}
