package controllers

import (
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/rollout"
)

// A rollout step of a FleetPolicy or a PolicySet (hub/rollout decides; this records it in the
// status and announces it).

// rolloutEvent is an Event of a rollout step, recorded once the status holding it is written.
type rolloutEvent struct {
	eventType, reason, message string
}

// rolloutStep is what one step of a rollout made: the new state, what it says of the
// declaration, and the Events of its transitions.
type rolloutStep struct {
	status      *policyhubv1.RolloutStatus
	progress    engine.Progress
	transitions []rolloutEvent
}

// stepRollout makes one step of a declaration's rollout plan from its clusters' outcomes and
// state (their results, and whether the engine judged their reports fresh) and their legacy
// objects (legacyCounts), the version's preview (nil: none; the plan's preview gate reads it):
// annotations hold the approvals, paused holds every wave, prev is the
// state before, and done names the current version once it completes every wave.
func stepRollout(plan *rollout.Plan, outcomes []engine.Outcome, clusters []policyhubv1.ClusterStatus, legacy map[string]*int64, preview *rollout.Preview, now time.Time,
	annotations map[string]string, paused bool, prev *policyhubv1.RolloutStatus, done func() *policyhubv1.StableVersion) rolloutStep {
	measures := map[string]rollout.Measure{}
	entries := make(map[string]*policyhubv1.ClusterStatus, len(clusters))
	for i := range clusters {
		entries[clusters[i].Name] = &clusters[i]
	}
	for _, o := range outcomes {
		if _, rolling := plan.Modes[o.Cluster]; !rolling {
			continue // held at the stable version: not judged
		}
		m := rollout.Measure{Synced: !o.Pending && o.Result.Phase == policyhubv1.ClusterPhaseSynced && o.Result.InForce != nil && *o.Result.InForce}
		if c := entries[o.Cluster]; c != nil {
			if c.Results != nil {
				m.Fail = c.Results.Fail
			}
			m.Blocked, m.DryRunsIncluded, m.Fresh = c.Blocked, c.BlockedIncludesDryRuns, c.ReportsFresh != nil && *c.ReportsFresh
		}
		m.LegacyObjects = legacy[o.Cluster]
		if c := entries[o.Cluster]; m.LegacyObjects == nil && c != nil {
			m.LegacyObjects = c.LegacyObjects // another replica works the cluster: its word
		}
		measures[o.Cluster] = m
	}
	parity := map[string]rollout.Parity{}
	for _, c := range clusters {
		if c.Preview != nil {
			parity[c.Name] = rollout.Parity{Reported: c.Preview.Reported, Differ: c.Preview.Differing()}
		}
	}
	approved := map[string]bool{}
	for _, w := range plan.Waves {
		approved[w.Name] = policyhubv1.RolloutApproved(annotations, w.Name, plan.Revision)
	}
	out := rollout.Next(rollout.Input{Waves: plan.Waves, Previous: plan.States, Measures: measures, Approved: approved, Paused: paused, Now: now,
		PreviewGate: plan.PreviewGate(), Preview: preview, Parity: parity, Swap: plan.Swaps()})

	next := &policyhubv1.RolloutStatus{Revision: plan.Revision, Waves: rollout.Statuses(out.Waves, plan.Waves)}
	if prev != nil {
		next.Stable = prev.Stable
	}
	if out.Done {
		next.Stable = done()
	}
	var holding string
	for _, s := range out.Waves {
		if s.Phase != rollout.Done {
			next.CurrentWave = s.Name
			holding = fmt.Sprintf("rollout of revision %s: wave %s %s", plan.Revision, s.Name, s.Phase)
			if s.Reason != "" {
				holding += ": " + s.Reason
			}
			break
		}
	}
	p := engine.Progress{}
	if holding != "" {
		p.Reason, p.Holding = "RolloutProgressing", holding
		if paused {
			p.Reason, p.Holding = "RolloutPaused", "paused: "+holding
		}
	}
	if !maps.Equal(plan.Modes, out.Modes) {
		p.Wake = rolloutRestep // render the new modes at once
	} else if due := rollout.NextWake(plan.Waves, out.Waves); !due.IsZero() {
		p.Wake = max(due.Sub(now)+time.Second, time.Millisecond)
	}
	return rolloutStep{status: next, progress: p, transitions: rolloutTransitions(prev, next, plan.Waves)}
}

// legacyCounts are the Kyverno legacy objects of each cluster whose summary was read and holds
// an inventory (whatever the objects' owner): a cluster absent has not reported one, or its
// summary was not read here (another replica works it), and holds a wave gated on them.
func legacyCounts(read engine.SummaryRead) map[string]*int64 {
	out := map[string]*int64{}
	for cluster, s := range read.Summaries {
		if inv := s.Spec.Engine.Legacy; inv != nil {
			n := inv.Total()
			out[cluster] = &n
		}
	}
	return out
}

// recordLegacy writes in each cluster's state whose summary was read here its legacy objects
// (legacy), when gated (the rollout gates a wave on them), and clears them otherwise: the replica
// that writes the declaration's status reads them for the clusters other replicas work. Only a
// gated declaration carries them, so an inventory's change rewrites no other declaration's slices.
func recordLegacy(clusters []policyhubv1.ClusterStatus, read engine.SummaryRead, legacy map[string]*int64, gated bool) {
	for i := range clusters {
		c := &clusters[i]
		switch {
		case !gated:
			c.LegacyObjects = nil
		case !read.Unread[c.Name] && read.Summaries[c.Name] != nil:
			c.LegacyObjects = legacy[c.Name]
		}
	}
}

// rolloutRestep is how soon a FleetPolicy is reconciled again when a step changed its
// clusters' modes, to sync them.
const rolloutRestep = 100 * time.Millisecond

// announceRollout records an Event per wave transition, once the status that holds it is written.
func announceRollout(recorder events.EventRecorder, obj runtime.Object, transitions []rolloutEvent) {
	for _, e := range transitions {
		recorder.Eventf(obj, nil, e.eventType, e.reason, "Rollout", "%s", e.message)
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
		if g := gates[w.Name]; w.Phase == policyhubv1.WaveWaiting && (w.Fail > g.MaxFail || w.Blocked > g.MaxBlocked ||
			(g.MaxLegacyObjects != nil && w.LegacyObjects != nil && *w.LegacyObjects > *g.MaxLegacyObjects)) {
			eventType = corev1.EventTypeWarning
		}
		events = append(events, rolloutEvent{eventType, "Wave" + string(w.Phase), policyhubv1.TruncateMessage(msg, 1024)})
	}
	return events
}
