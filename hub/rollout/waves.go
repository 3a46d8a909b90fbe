package rollout

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

// Cluster is a placed cluster, with the labels a wave's selector reads.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Waves assigns the placed clusters to the spec's waves: each cluster to the first wave that
// selects it (a wave with neither clusters nor selector takes every cluster left). A cluster
// no wave selects is in none, and gets nothing.
func Waves(spec []policyhubv1.RolloutWave, placed []Cluster) ([]Wave, error) {
	waves := make([]Wave, len(spec))
	selectors := make([]labels.Selector, len(spec))
	for i, w := range spec {
		waves[i] = Wave{Name: w.Name, Gate: Gate{MaxFail: w.Gate.MaxFail, MaxBlocked: w.Gate.MaxBlocked, Approval: w.Gate.Approval}}
		if m := w.Gate.MaxLegacyObjects; m != nil {
			n := *m
			waves[i].Gate.MaxLegacyObjects = &n
		}
		if w.Gate.Soak != nil {
			waves[i].Gate.Soak = w.Gate.Soak.Duration
		}
		if w.ClusterSelector != nil {
			// The placement's check: a selector requiring no label would take every placed
			// cluster (without some label) into this wave, collapsing the rollout.
			sel, err := placement.Selector(w.ClusterSelector)
			if err != nil {
				return nil, fmt.Errorf("spec.rollout.waves[%d].clusterSelector: %w", i, err)
			}
			selectors[i] = sel
		}
	}
	for _, c := range placed {
		for i, w := range spec {
			rest := len(w.Clusters) == 0 && w.ClusterSelector == nil
			if rest || slices.Contains(w.Clusters, c.Name) || (selectors[i] != nil && selectors[i].Matches(labels.Set(c.Labels))) {
				waves[i].Clusters = append(waves[i].Clusters, c.Name)
				break
			}
		}
	}
	return waves, nil
}

// soakDue is when the wave's soak ends, while it soaks (or a swap's settling, see SwapSettle).
func (w Wave) soakDue(s WaveState) (time.Time, bool) {
	if s.Phase == Enforcing && s.HoldingSince != nil {
		return s.HoldingSince.Add(SwapSettle), true // a swap settling
	}
	if s.Phase != Waiting || s.HoldingSince == nil || w.Gate.Soak == 0 {
		return time.Time{}, false
	}
	return s.HoldingSince.Add(w.Gate.Soak), true
}

// NextWake is when the rollout may move without any new measure: a soak ending. Zero when none.
func NextWake(waves []Wave, states []WaveState) time.Time {
	byName := map[string]WaveState{}
	for _, s := range states {
		byName[s.Name] = s
	}
	var first time.Time
	for _, w := range waves {
		if due, ok := w.soakDue(byName[w.Name]); ok && (first.IsZero() || due.Before(first)) {
			first = due
		}
	}
	return first
}
