package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
)

// Plan is a FleetPolicy's rollout before a step: its waves over the placed clusters, their
// states (reset for a new template version), and the modes those give the clusters.
type Plan struct {
	// Revision names the template version rolled out.
	Revision string
	Waves    []Wave
	States   []WaveState
	// Modes are the modes of the clusters that get the current version.
	Modes map[string]policyhubv1.Mode
	// stable is the last version that completed the rollout, when it is not the current one:
	// the clusters of waves not reached yet keep it.
	stable *policyhubv1.StableVersion
}

// Targets places and renders a FleetPolicy as the hub syncs it, and is what `kubectl policyhub
// sync --dry-run` previews: with a rollout, each placed cluster gets the current template in
// its wave's mode, else (its wave not reached) the last version that completed the rollout, in
// Enforce, else nothing. The plan is nil without a rollout.
func Targets(hubID string, fp *policyhubv1.FleetPolicy, inv placement.Inventory) (*render.Targets, *Plan, error) {
	if fp.Spec.Rollout == nil {
		t, err := render.FleetPolicyTargets(hubID, fp, inv)
		return t, nil, err
	}
	var plan *Plan
	t, err := render.FleetPolicyRolloutTargets(hubID, fp, inv, func(placed []string) (map[string]render.Version, error) {
		var err error
		plan, err = newPlan(fp, placed, inv)
		if err != nil {
			return nil, err
		}
		return plan.versions(), nil
	})
	return t, plan, err
}

func newPlan(fp *policyhubv1.FleetPolicy, placed []string, inv placement.Inventory) (*Plan, error) {
	revision, err := render.TemplateRevision(fp.Spec.Template)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]map[string]string, len(inv.Clusters))
	for _, c := range inv.Clusters {
		labels[c.Name] = c.Labels
	}
	clusters := make([]Cluster, 0, len(placed))
	for _, name := range placed {
		clusters = append(clusters, Cluster{Name: name, Labels: labels[name]})
	}
	waves, err := Waves(fp.Spec.Rollout.Waves, clusters)
	if err != nil {
		return nil, err
	}
	p := &Plan{Revision: revision, Waves: waves}
	if st := fp.Status.Rollout; st != nil {
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

// versions are what each cluster of a wave gets; clusters left out get nothing.
func (p *Plan) versions() map[string]render.Version {
	out := map[string]render.Version{}
	for _, w := range p.Waves {
		for _, c := range w.Clusters {
			switch mode, ok := p.Modes[c]; {
			case ok:
				out[c] = render.Version{Mode: mode}
			case p.stable != nil:
				out[c] = render.Version{Template: &p.stable.Template, Revision: p.stable.Revision, Mode: policyhubv1.ModeEnforce}
			}
		}
	}
	return out
}

// StatesOf reads the waves' states from a FleetPolicy's status.
func StatesOf(in []policyhubv1.WaveStatus) []WaveState {
	out := make([]WaveState, 0, len(in))
	for _, w := range in {
		s := WaveState{Name: w.Name, Phase: w.Phase, Reason: w.Reason, Fail: w.Fail, Blocked: w.Blocked}
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
