package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
)

// Plan is a declaration's rollout before a step: its waves over the placed clusters, their
// states (reset for a new version), and the modes those give the clusters.
type Plan struct {
	// Revision names the version rolled out.
	Revision string
	Waves    []Wave
	States   []WaveState
	// Modes are the modes of the clusters that get the current version.
	Modes map[string]policyhubv1.Mode
	// stable is the last version that completed the rollout, when it is not the current one:
	// the clusters of waves not reached yet keep it.
	stable *policyhubv1.StableVersion
	// previewGate is the rollout's preview gate (nil: none).
	previewGate *policyhubv1.PreviewGate
}

// PreviewGate is the rollout's preview gate (nil: none).
func (p *Plan) PreviewGate() *policyhubv1.PreviewGate { return p.previewGate }

// PreviewClusters are the clusters the version's shadow runs in (nil: none): under a preview
// gate, every cluster of a wave until the first wave starts; with parity, after that, the
// clusters of the waves not started yet (each wave's start waits on their results).
func (p *Plan) PreviewClusters() []string {
	g := p.previewGate
	if g == nil {
		return nil
	}
	phases := map[string]Phase{}
	for _, s := range p.States {
		phases[s.Name] = s.Phase
	}
	pending := func(w Wave) bool { return phases[w.Name] == Pending || phases[w.Name] == "" }
	fleetWide := (g.MaxWouldFail != nil || g.MaxNewlyFailing != nil) && len(p.Waves) > 0 && pending(p.Waves[0])
	if !fleetWide && !p.swaps() {
		return nil
	}
	var out []string
	for _, w := range p.Waves {
		if pending(w) {
			out = append(out, w.Clusters...)
		}
	}
	return out
}

// swaps says whether the rollout swaps versions (a preview gate with parity, and a stable
// version to swap): a wave goes straight to Enforce, the stable version kept beside the new one
// until the wave is done.
func (p *Plan) swaps() bool {
	return p.previewGate != nil && p.previewGate.Parity != nil && p.stable != nil
}

// Swaps says whether the rollout swaps the stable version for the current one (see swaps).
func (p *Plan) Swaps() bool { return p.swaps() }

// NewPlan is a FleetPolicy's rollout over the clusters its placement selected (placed, sorted),
// with their labels from inv (see Rollout). Versions says what each cluster gets.
func NewPlan(fp *policyhubv1.FleetPolicy, placed []string, inv placement.Inventory) (*Plan, error) {
	revision, err := render.TemplateRevision(fp.Spec.Template)
	if err != nil {
		return nil, err
	}
	return Rollout(revision, fp.Spec.Rollout, fp.Status.Rollout, placed, inv)
}

// Rollout is the rollout of version revision by spec, from the state in status (nil: none yet),
// over the placed clusters (sorted) with their labels from inv: its waves, their states (reset
// for a new version), and the modes those give.
func Rollout(revision string, spec *policyhubv1.Rollout, status *policyhubv1.RolloutStatus, placed []string, inv placement.Inventory) (*Plan, error) {
	labels := make(map[string]map[string]string, len(inv.Clusters))
	for _, c := range inv.Clusters {
		labels[c.Name] = c.Labels
	}
	clusters := make([]Cluster, 0, len(placed))
	for _, name := range placed {
		clusters = append(clusters, Cluster{Name: name, Labels: labels[name]})
	}
	waves, err := Waves(spec.Waves, clusters)
	if err != nil {
		return nil, err
	}
	p := &Plan{Revision: revision, Waves: waves, previewGate: spec.PreviewGate}
	if st := status; st != nil {
		if st.Revision == revision {
			p.States = StatesOf(st.Waves)
		}
		if st.Stable != nil && st.Stable.Revision != revision {
			p.stable = st.Stable
		}
	}
	p.Modes = Modes(waves, p.States)
	return p, nil
}

// Stable is the last version that completed the rollout when it is not the current one (nil
// otherwise): the clusters of waves not reached yet keep it.
func (p *Plan) Stable() *policyhubv1.StableVersion { return p.stable }

// Assignment is what a cluster of a wave gets: the current version in Mode, or (Stable) the
// last version that completed the rollout, in Enforce; KeepStable: the current version in
// Enforce with the stable one kept beside it (a swap, until the wave is done).
type Assignment struct {
	Stable     bool
	KeepStable bool
	Mode       policyhubv1.Mode
}

// Assignments say what each cluster of a wave gets; clusters left out get nothing (held).
func (p *Plan) Assignments() map[string]Assignment {
	out := map[string]Assignment{}
	enforcing := map[string]bool{}
	for _, s := range p.States {
		enforcing[s.Name] = s.Phase == Enforcing
	}
	for _, w := range p.Waves {
		for _, c := range w.Clusters {
			switch mode, ok := p.Modes[c]; {
			case ok:
				out[c] = Assignment{Mode: mode, KeepStable: p.swaps() && enforcing[w.Name] && p.stable != nil}
			case p.stable != nil:
				out[c] = Assignment{Stable: true, Mode: policyhubv1.ModeEnforce}
			}
		}
	}
	return out
}

// Versions are what each cluster of a FleetPolicy's wave gets, as `kubectl policyhub sync
// --dry-run` previews too: the current template in its wave's mode, else (its wave not reached)
// the last version that completed the rollout, in Enforce; clusters left out get nothing (held).
func (p *Plan) Versions() map[string]render.Version {
	out := map[string]render.Version{}
	for c, a := range p.Assignments() {
		switch {
		case a.KeepStable && p.stable.Template != nil:
			out[c] = render.Version{Mode: a.Mode, Keep: &render.Version{Template: p.stable.Template, Revision: p.stable.Revision, Mode: policyhubv1.ModeEnforce}}
		case !a.Stable:
			out[c] = render.Version{Mode: a.Mode}
		case p.stable.Template != nil:
			out[c] = render.Version{Template: p.stable.Template, Revision: p.stable.Revision, Mode: a.Mode}
		}
	}
	return out
}

// StatesOf reads the waves' states from a FleetPolicy's status.
func StatesOf(in []policyhubv1.WaveStatus) []WaveState {
	out := make([]WaveState, 0, len(in))
	for _, w := range in {
		s := WaveState{Name: w.Name, Phase: w.Phase, Reason: w.Reason, Fail: w.Fail, Blocked: w.Blocked}
		if w.LegacyObjects != nil {
			n := *w.LegacyObjects
			s.LegacyObjects = &n
		}
		if w.Since != nil {
			s.Since = w.Since.Time
		}
		if w.SyncedAt != nil {
			t := w.SyncedAt.Time
			s.SyncedAt = &t
		}
		if w.HoldingSince != nil {
			t := w.HoldingSince.Time
			s.HoldingSince = &t
		}
		out = append(out, s)
	}
	return out
}

// Statuses writes the waves' states for the status. Times there have whole seconds: SyncedAt
// is rounded up, so that nothing made in the same second, maybe before the sync, counts as after.
func Statuses(states []WaveState, waves []Wave) []policyhubv1.WaveStatus {
	out := make([]policyhubv1.WaveStatus, 0, len(states))
	for i, s := range states {
		w := policyhubv1.WaveStatus{Name: s.Name, Phase: s.Phase, Reason: policyhubv1.TruncateMessage(s.Reason, 1024), Fail: s.Fail, Blocked: s.Blocked, Clusters: int32(len(waves[i].Clusters))}
		if s.LegacyObjects != nil {
			n := *s.LegacyObjects
			w.LegacyObjects = &n
		}
		if !s.Since.IsZero() {
			w.Since = &metav1.Time{Time: s.Since.Truncate(time.Second)}
		}
		if s.SyncedAt != nil {
			t := s.SyncedAt.Truncate(time.Second)
			if !t.Equal(*s.SyncedAt) {
				t = t.Add(time.Second)
			}
			w.SyncedAt = &metav1.Time{Time: t}
		}
		if s.HoldingSince != nil {
			w.HoldingSince = &metav1.Time{Time: s.HoldingSince.Truncate(time.Second)}
		}
		out = append(out, w)
	}
	return out
}
