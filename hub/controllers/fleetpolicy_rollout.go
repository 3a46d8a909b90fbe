package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/rollout"
)

// rolloutPass is one reconcile's view of a FleetPolicy's rollout: the waves of the placed
// clusters, their states before this reconcile (reset for a new template version) and the
// modes those states gave the clusters it syncs.
type rolloutPass struct {
	revision string
	waves    []rollout.Wave
	states   []rollout.WaveState
	modes    map[string]policyhubv1.Mode
	// transitions are the Events to record once the status is written.
	transitions []rolloutEvent
}

type rolloutEvent struct {
	eventType, reason, message string
}

// rolloutChooser returns the chooser that gives each placed cluster its version: the current
// template in the mode of its wave's state, else (its wave not reached) the last version that
// completed the rollout, in Enforce, else nothing. It records what it decided in d.rollout.
func (d *fleetPolicy) rolloutChooser(inv placement.Inventory) render.Chooser {
	return func(placed []string) (map[string]render.Version, error) {
		spec := d.Spec.Rollout
		revision, err := render.TemplateRevision(d.Spec.Template)
		if err != nil {
			return nil, err
		}
		labels := map[string]map[string]string{}
		for _, c := range inv.Clusters {
			labels[c.Name] = c.Labels
		}
		clusters := make([]rollout.Cluster, 0, len(placed))
		for _, name := range placed {
			clusters = append(clusters, rollout.Cluster{Name: name, Labels: labels[name]})
		}
		waves, err := rollout.Waves(spec.Waves, clusters)
		if err != nil {
			return nil, err
		}
		pass := &rolloutPass{revision: revision, waves: waves}
		if st := d.Status.Rollout; st != nil && st.Revision == revision {
			pass.states = waveStates(st.Waves)
		}
		pass.modes = rollout.Modes(waves, pass.states)
		d.rollout = pass

		versions := make(map[string]render.Version, len(placed))
		var stable *policyhubv1.StableVersion
		if st := d.Status.Rollout; st != nil && st.Stable != nil && st.Stable.Revision != revision {
			stable = st.Stable
		}
		for _, w := range waves {
			for _, c := range w.Clusters {
				switch mode, ok := pass.modes[c]; {
				case ok:
					versions[c] = render.Version{Mode: mode}
				case stable != nil:
					versions[c] = render.Version{Template: &stable.Template, Revision: stable.Revision, Mode: policyhubv1.ModeEnforce}
				}
			}
		}
		return versions, nil
	}
}

// progressRollout makes one step of the rollout from the clusters' outcomes and summaries,
// and records the new state in the status.
func (d *fleetPolicy) progressRollout(outcomes []clusterOutcome, read summaryRead, owned map[string][]aggregate.Policy, now time.Time) progress {
	pass := d.rollout
	if pass == nil {
		d.Status.Rollout = nil
		return progress{}
	}
	syncedAt := map[string]time.Time{} // by cluster: when its wave was seen synced
	for i, w := range pass.waves {
		for _, s := range pass.states {
			if s.Name == w.Name && s.SyncedAt != nil {
				for _, c := range pass.waves[i].Clusters {
					syncedAt[c] = *s.SyncedAt
				}
			}
		}
	}
	measures := map[string]rollout.Measure{}
	for _, o := range outcomes {
		if _, rolling := pass.modes[o.cluster]; !rolling {
			continue // held at the stable version: not judged
		}
		m := rollout.Measure{Synced: !o.pending && o.result.Phase == policyhubv1.ClusterPhaseSynced && o.result.InForce != nil && *o.result.InForce}
		// The version arrived when the worker wrote it; a worker that did not (it found it
		// there when it started) leaves the moment the wave was seen synced.
		arrived := o.wroteAt
		if arrived.IsZero() {
			arrived = syncedAt[o.cluster]
		}
		if s, ok := read.summaries[o.cluster]; ok {
			res := aggregate.ForPolicies(s, owned[o.cluster], now)
			m.Fail, m.Blocked = res.Counts.Fail, res.Blocked
			m.Fresh = !arrived.IsZero() && freshReport(res, arrived)
		}
		measures[o.cluster] = m
	}
	approved := map[string]bool{}
	for _, w := range pass.waves {
		approved[w.Name] = policyhubv1.RolloutApproved(d.GetAnnotations(), w.Name, pass.revision)
	}
	out := rollout.Next(rollout.Input{Waves: pass.waves, Previous: pass.states, Measures: measures, Approved: approved, Paused: d.Spec.Rollout.Paused, Now: now})

	prev := d.Status.Rollout
	next := &policyhubv1.RolloutStatus{Revision: pass.revision, Waves: waveStatuses(out.Waves, pass.waves)}
	if prev != nil {
		next.Stable = prev.Stable
	}
	if out.Done {
		next.Stable = &policyhubv1.StableVersion{Revision: pass.revision, Template: *d.Spec.Template.DeepCopy()}
	}
	var holding string
	for _, s := range out.Waves {
		if s.Phase != rollout.Done {
			next.CurrentWave = s.Name
			holding = fmt.Sprintf("rollout of revision %s: wave %s %s", pass.revision, s.Name, s.Phase)
			if s.Reason != "" {
				holding += ": " + s.Reason
			}
			break
		}
	}
	pass.transitions = rolloutTransitions(prev, next, pass.waves)
	d.Status.Rollout = next

	p := progress{}
	if holding != "" {
		p.reason, p.holding = "RolloutProgressing", holding
		if d.Spec.Rollout.Paused {
			p.reason, p.holding = "RolloutPaused", "paused: "+holding
		}
	}
	if !sameModes(pass.modes, out.Modes) {
		p.wake = rolloutRestep // render the new modes at once
	} else if due := rollout.NextWake(pass.waves, out.Waves); !due.IsZero() {
		p.wake = max(due.Sub(now)+time.Second, time.Millisecond)
	}
	return p
}

// reportGrace is how long after a policy arrived in a cluster its agent's summary may still
// list no result of it for the rollout to take that as "nothing to report": Kyverno evaluates
// every resource again when a policy changes and merges the results into reports within
// seconds; a policy that matches no resource never has any.
const reportGrace = 30 * time.Second

// freshReport tells whether a summary's results of a declaration's policies are of the version
// that arrived at arrived: generated after it, every result made after it (Kyverno evaluates
// every resource again when a policy changes; report times have whole seconds), and a policy
// without results only once Kyverno has had reportGrace to report it.
func freshReport(res aggregate.Results, arrived time.Time) bool {
	if res.ReportTime == nil || !res.ReportTime.After(arrived) {
		return false
	}
	if !res.OldestResult.IsZero() && res.OldestResult.Before(arrived.Truncate(time.Second)) {
		return false
	}
	return res.Unlisted == 0 || !res.ReportTime.Time.Before(arrived.Add(reportGrace))
}

// rolloutRestep is how soon a FleetPolicy is reconciled again when a step changed its
// clusters' modes, to sync them.
const rolloutRestep = 100 * time.Millisecond

// announceRollout records an Event per wave transition, once the status that holds it is written.
func (d *fleetPolicy) announceRollout() {
	if d.rollout == nil {
		return
	}
	for _, e := range d.rollout.transitions {
		d.r.Recorder.Eventf(d.FleetPolicy, nil, e.eventType, e.reason, "Rollout", "%s", e.message)
	}
}

// rolloutTransitions are the Events of a step: a new version started, and every wave that
// changed phase.
func rolloutTransitions(prev, next *policyhubv1.RolloutStatus, waves []rollout.Wave) []rolloutEvent {
	var events []rolloutEvent
	before := map[string]policyhubv1.WavePhase{}
	if prev != nil && prev.Revision == next.Revision {
		for _, w := range prev.Waves {
			before[w.Name] = w.Phase
		}
	} else {
		msg := fmt.Sprintf("rolling out revision %s wave by wave", next.Revision)
		if prev != nil && prev.Revision != "" {
			msg = fmt.Sprintf("rolling out revision %s (was %s) wave by wave; clusters of waves not reached yet keep the last completed version", next.Revision, prev.Revision)
		}
		events = append(events, rolloutEvent{corev1.EventTypeNormal, "RolloutStarted", msg})
	}
	gates := map[string]rollout.Gate{}
	for _, w := range waves {
		gates[w.Name] = w.Gate
	}
	for _, w := range next.Waves {
		was, ok := before[w.Name]
		if !ok {
			was = policyhubv1.WavePending
		}
		if was == w.Phase {
			continue
		}
		msg := fmt.Sprintf("wave %s: %s -> %s (%d clusters)", w.Name, was, w.Phase, w.Clusters)
		if w.Reason != "" {
			msg += ": " + w.Reason
		}
		eventType := corev1.EventTypeNormal
		if g := gates[w.Name]; w.Phase == policyhubv1.WaveWaiting && (w.Fail > g.MaxFail || w.Blocked > g.MaxBlocked) {
			eventType = corev1.EventTypeWarning
		}
		events = append(events, rolloutEvent{eventType, "Wave" + string(w.Phase), policyhubv1.TruncateMessage(msg, 1024)})
	}
	return events
}

func sameModes(a, b map[string]policyhubv1.Mode) bool {
	if len(a) != len(b) {
		return false
	}
	for c, m := range a {
		if b[c] != m {
			return false
		}
	}
	return true
}

// waveStates reads the waves' states from the status.
func waveStates(in []policyhubv1.WaveStatus) []rollout.WaveState {
	out := make([]rollout.WaveState, 0, len(in))
	for _, w := range in {
		s := rollout.WaveState{Name: w.Name, Phase: w.Phase, Reason: w.Reason, Fail: w.Fail, Blocked: w.Blocked}
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

// waveStatuses writes the waves' states for the status. Times there have whole seconds:
// SyncedAt is rounded up, so a report generated in the same second as the sync, maybe before
// it, never counts as fresh.
func waveStatuses(states []rollout.WaveState, waves []rollout.Wave) []policyhubv1.WaveStatus {
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
