package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// Phase is where a wave is: the API's phases (Pending: its clusters get nothing of the
// current version; Auditing: it runs in Audit and waits for its clusters' reports on it;
// Waiting: reports are in, the gate, the soak or an approval is due; Enforcing: promoted,
// Enforce is being synced; Done: in force in Enforce in every cluster of the wave).
type Phase = policyhubv1.WavePhase

const (
	Pending   = policyhubv1.WavePending
	Auditing  = policyhubv1.WaveAuditing
	Waiting   = policyhubv1.WaveWaiting
	Enforcing = policyhubv1.WaveEnforcing
	Done      = policyhubv1.WaveDone
)

// Gate is what a wave must show, measured in Audit, before it is promoted to Enforce.
type Gate struct {
	// MaxFail and MaxBlocked bound the fail results and the would-be-blocked admissions of the
	// declaration's policies, summed over the wave's clusters.
	MaxFail, MaxBlocked int64
	// Soak is how long the gate must hold without a break.
	Soak time.Duration
	// MaxLegacyObjects, when set, bounds each cluster's Kyverno legacy objects (owned or not):
	// the wave holds while a cluster has more, or has not reported its inventory.
	MaxLegacyObjects *int64
	// Approval asks for a person's approval as well.
	Approval bool
}

// Wave is a set of clusters promoted together.
type Wave struct {
	Name     string
	Clusters []string
	Gate     Gate
}

// Measure is what one cluster says of the declaration's current version.
type Measure struct {
	// Synced: the cluster holds the current version in the mode its wave wants, in force.
	Synced bool
	// Fresh: what the cluster's agent says of the declaration is of the current version (the
	// caller decides from the summary and when the version arrived); a wave is never judged on
	// older reports.
	Fresh bool
	// Fail and Blocked: the declaration's fail results and would-be-blocked admissions there.
	Fail, Blocked int64
	// DryRunsIncluded: Blocked may count server-side dry-runs (a CEL policy's, or the agent
	// could not read Kyverno's metrics); the wave's reason names such clusters.
	DryRunsIncluded bool
	// LegacyObjects: the cluster's Kyverno legacy objects, as its agent last reported them
	// (whatever their owner and version); nil when it reported no inventory.
	LegacyObjects *int64
}

// WaveState is a wave's state, as status shows it.
type WaveState struct {
	Name  string
	Phase Phase
	// Since is when the wave entered its phase.
	Since time.Time
	// SyncedAt is when every cluster of the wave was first seen holding the current version in
	// Audit (nil before); the wave is judged from then on, on fresh measures.
	SyncedAt *time.Time
	// HoldingSince is when the gate started to hold without a break (nil while it does not).
	HoldingSince *time.Time
	// Reason says why a wave waits, with the measured values.
	Reason string
	// Fail and Blocked are the wave's last measured sums.
	Fail, Blocked int64
	// LegacyObjects is the wave's last measured sum of legacy objects (set when its gate has
	// MaxLegacyObjects).
	LegacyObjects *int64
}

// Input is everything a step depends on.
type Input struct {
	Waves []Wave
	// Previous are the waves' states after the last step (by name; a wave not there is Pending).
	Previous []WaveState
	// Measures are by cluster.
	Measures map[string]Measure
	// Approved are the waves a person approved.
	Approved map[string]bool
	Paused   bool
	Now      time.Time
	// PreviewGate, when set, holds the first wave Pending until the version's preview is
	// complete and within it; Preview is what the preview measured (nil: none yet). With
	// parity, every wave waits for its clusters' Parity (by cluster) and swaps.
	PreviewGate *policyhubv1.PreviewGate
	Preview     *Preview
	Parity      map[string]Parity
	// Swap: there is a running (stable) version to swap for the new one; a first version has
	// nothing to be alike with, and rolls out as without parity.
	Swap bool
}

// Parity is what one cluster's shadow of the new version says against the running version.
type Parity struct {
	// Reported: the cluster's agent reported the shadow's results for the new version.
	Reported bool
	// Differ counts the resources the two judge differently, or only one of them judges.
	Differ int64
}

// Preview is what a version's preview measured over the placed clusters.
type Preview struct {
	// Complete: every placed cluster reported the shadow's results.
	Complete bool
	// Clusters and Reported count the placed clusters and those that reported.
	Clusters, Reported int32
	// WouldFail and NewlyFailing: the resources the version would fail, and those of them the
	// running version does not fail.
	WouldFail, NewlyFailing int64
}

// Output is the next state.
type Output struct {
	Waves []WaveState
	// Modes are the modes of the clusters that get the policy; the clusters of Pending waves
	// are absent.
	Modes map[string]policyhubv1.Mode
	// Done is true once every wave is.
	Done bool
}

// Modes are the modes the waves' states give their clusters, without a step: what the
// clusters are synced to before the step's measures are read.
func Modes(waves []Wave, states []WaveState) map[string]policyhubv1.Mode {
	return Next(Input{Waves: waves, Previous: states, Paused: true}).Modes
}

// Next makes one step of the rollout. Several waves may move in one step (a wave done lets the
// next start). A wave entering Auditing or Enforcing stops there for the step: the measures given
// are of what its clusters held before, so it is judged from the next step on.
func Next(in Input) Output {
	prev := map[string]WaveState{}
	for _, s := range in.Previous {
		prev[s.Name] = s
	}
	out := Output{Modes: map[string]policyhubv1.Mode{}, Done: true}
	reached := true // every wave before this one is Done
	for i, w := range in.Waves {
		s, ok := prev[w.Name]
		if !ok || s.Phase == "" {
			s = WaveState{Name: w.Name, Phase: Pending}
		}
		switch {
		case in.Paused || !reached:
		case s.Phase == Pending && in.PreviewGate != nil:
			s = previewGates(i == 0, w, s, in)
		default:
			s = step(w, s, in)
		}
		switch s.Phase {
		case Auditing, Waiting:
			setModes(out.Modes, w.Clusters, policyhubv1.ModeAudit)
		case Enforcing, Done:
			setModes(out.Modes, w.Clusters, policyhubv1.ModeEnforce)
		}
		reached = reached && s.Phase == Done
		out.Done = out.Done && s.Phase == Done
		out.Waves = append(out.Waves, s)
	}
	return out
}

// step moves the reached wave w from s as far as the input allows.
func step(w Wave, s WaveState, in Input) WaveState {
	enter := func(p Phase) {
		s.Phase, s.Since, s.Reason = p, in.Now, ""
	}
	if s.Phase == Pending {
		// Measures are of what the clusters held before: judged from the next step on.
		enter(Auditing)
		s.SyncedAt, s.HoldingSince, s.Fail, s.Blocked, s.LegacyObjects = nil, nil, 0, 0, nil
		return s
	}
	if s.Phase == Auditing && s.SyncedAt == nil {
		if syncing := unsynced(w.Clusters, in.Measures); len(syncing) > 0 {
			s.Reason = "syncing the current version in Audit: waiting for " + strings.Join(syncing, ", ")
			return s
		}
		// Judged from the next step on, on reports of what the clusters hold now.
		synced := in.Now
		s.SyncedAt = &synced
		s.Reason = "waiting for reports on the current version"
		return s
	}
	if s.Phase == Auditing || s.Phase == Waiting {
		if stale := unreported(w.Clusters, in.Measures); len(stale) > 0 {
			s.Reason = "waiting for reports on the current version from " + strings.Join(stale, ", ")
			return s
		}
		if s.Phase == Auditing {
			enter(Waiting)
		}
		s.Fail, s.Blocked = 0, 0
		for _, c := range w.Clusters {
			// A negative measure must not cancel another cluster's failures, nor a huge one
			// wrap the sum to a negative.
			s.Fail = aggregate.AddCount(s.Fail, in.Measures[c].Fail)
			s.Blocked = aggregate.AddCount(s.Blocked, in.Measures[c].Blocked)
		}
		switch {
		case s.Fail > w.Gate.MaxFail:
			s.HoldingSince = nil
			s.Reason = fmt.Sprintf("%d fail results, at most %d allowed", s.Fail, w.Gate.MaxFail)
			return s
		case s.Blocked > w.Gate.MaxBlocked:
			s.HoldingSince = nil
			s.Reason = fmt.Sprintf("%d admissions refused%s, at most %d allowed", s.Blocked, dryRunsNote(w.Clusters, in.Measures), w.Gate.MaxBlocked)
			return s
		}
		if held, reason := legacyGate(w, in.Measures, &s); held {
			s.HoldingSince = nil
			s.Reason = reason
			return s
		}
		if s.HoldingSince == nil {
			since := in.Now
			s.HoldingSince = &since
		}
		if held := in.Now.Sub(*s.HoldingSince); held < w.Gate.Soak {
			s.Reason = fmt.Sprintf("soaking: the gate has held for %s of %s", held.Round(time.Second), w.Gate.Soak)
			return s
		}
		if w.Gate.Approval && !in.Approved[w.Name] {
			s.Reason = "waiting for approval"
			return s
		}
		// Synced says the clusters hold the mode of the last step (Audit): Done is judged from
		// the next step on, once Enforce was applied.
		enter(Enforcing)
		s.HoldingSince = nil
		return s
	}
	if s.Phase == Enforcing {
		if syncing := unsynced(w.Clusters, in.Measures); len(syncing) > 0 {
			s.Reason = "syncing Enforce: waiting for " + strings.Join(syncing, ", ")
			s.HoldingSince = nil
			return s
		}
		if in.Swap && in.PreviewGate != nil && in.PreviewGate.Parity != nil {
			// A swap: the running version goes only once the new one has been in force a while.
			if s.HoldingSince == nil {
				since := in.Now
				s.HoldingSince = &since
			}
			if held := in.Now.Sub(*s.HoldingSince); held < SwapSettle {
				s.Reason = fmt.Sprintf("swapping: the new version is in force, the running one is removed once it has been for %s (%s so far)", SwapSettle, held.Round(time.Second))
				return s
			}
		}
		enter(Done)
		s.HoldingSince = nil
	}
	return s
}

// SwapSettle is how long a swapped-in version must have been in force in a wave's clusters
// before the version it replaces is removed there. Kyverno reports a policy ready once its
// webhook is configured, and its admission controller may take a moment more to judge with it:
// on the local fleet, a violating request was admitted within a second of the legacy policy's
// removal when the removal followed the readiness at once.
const SwapSettle = 15 * time.Second

// previewGates starts a Pending wave w (s) under a preview gate: the first wave only once the
// version's preview is complete and within the gate's fleet-wide bounds; with parity, any wave
// only once its clusters have reported the shadow and differ in at most the accepted number of
// resources, and then straight into Enforcing (a swap: the running version stays beside the new
// one until that is in force). Until then it stays Pending, saying why. Over a bound it stays
// there: the version does not ship further (a new version, or a wider gate, is judged again).
func previewGates(first bool, w Wave, s WaveState, in Input) WaveState {
	g := in.PreviewGate
	if first && (g.MaxWouldFail != nil || g.MaxNewlyFailing != nil) {
		p := in.Preview
		switch {
		case p == nil || !p.Complete:
			reported, clusters := int32(0), int32(0)
			if p != nil {
				reported, clusters = p.Reported, p.Clusters
			}
			s.Reason = fmt.Sprintf("previewing the version: %d of %d clusters reported", reported, clusters)
			return s
		case g.MaxWouldFail != nil && p.WouldFail > *g.MaxWouldFail:
			s.Reason = fmt.Sprintf("preview gate exceeded: the version would fail %d resources, at most %d allowed; it is not shipped", p.WouldFail, *g.MaxWouldFail)
			return s
		case g.MaxNewlyFailing != nil && p.NewlyFailing > *g.MaxNewlyFailing:
			s.Reason = fmt.Sprintf("preview gate exceeded: the version would newly fail %d resources, at most %d allowed; it is not shipped", p.NewlyFailing, *g.MaxNewlyFailing)
			return s
		}
	}
	if g.Parity == nil || !in.Swap {
		return step(w, s, in) // Pending → Auditing
	}
	var differ int64
	var waiting []string
	for _, c := range w.Clusters {
		p := in.Parity[c]
		if !p.Reported {
			waiting = append(waiting, c)
		}
		differ = aggregate.AddCount(differ, p.Differ)
	}
	switch {
	case len(waiting) > 0:
		s.Reason = "parity: waiting for the shadow's results from " + namedClusters(waiting)
		return s
	case differ > g.Parity.MaxDiffering:
		s.Reason = fmt.Sprintf("parity: the new version judges %d resources of the wave differently from the running one, at most %d accepted; not swapped", differ, g.Parity.MaxDiffering)
		return s
	}
	s.Phase, s.Since, s.Reason = Enforcing, in.Now, ""
	s.SyncedAt, s.HoldingSince, s.Fail, s.Blocked, s.LegacyObjects = nil, nil, 0, 0, nil
	return s
}

// namedClusters names at most maxNamedClusters of clusters, and says how many more there are.
func namedClusters(clusters []string) string {
	if len(clusters) <= maxNamedClusters {
		return strings.Join(clusters, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(clusters[:maxNamedClusters], ", "), len(clusters)-maxNamedClusters)
}

// maxNamedClusters bounds the clusters a reason names.
const maxNamedClusters = 5

// dryRunsNote says which refusals the count leaves out: server-side dry-runs, except in the
// clusters whose count may include them (named, at most maxNamedClusters).
func dryRunsNote(clusters []string, measures map[string]Measure) string {
	var included []string
	for _, c := range clusters {
		if m := measures[c]; m.DryRunsIncluded && m.Blocked > 0 {
			included = append(included, c)
		}
	}
	if len(included) == 0 {
		return " (server-side dry-runs not counted)"
	}
	sort.Strings(included)
	names := strings.Join(included[:min(len(included), maxNamedClusters)], ", ")
	if more := len(included) - maxNamedClusters; more > 0 {
		names += fmt.Sprintf(" and %d more", more)
	}
	return " (server-side dry-runs included in " + names + ": a CEL policy's, or Kyverno's metrics unread there)"
}

// legacyGate measures the wave's legacy objects into s when its gate bounds them, and says
// whether the gate holds the wave, and why: a cluster without an inventory, or with more legacy
// objects than allowed, holds it.
func legacyGate(w Wave, measures map[string]Measure, s *WaveState) (held bool, reason string) {
	s.LegacyObjects = nil
	limit := w.Gate.MaxLegacyObjects
	if limit == nil {
		return false, ""
	}
	var sum int64
	for _, c := range w.Clusters {
		if n := measures[c].LegacyObjects; n != nil {
			sum = aggregate.AddCount(sum, *n)
		}
	}
	s.LegacyObjects = &sum
	unknown := clustersWhere(w.Clusters, measures, func(m Measure) bool { return m.LegacyObjects == nil })
	over := clustersWhere(w.Clusters, measures, func(m Measure) bool { return m.LegacyObjects != nil && *m.LegacyObjects > *limit })
	var parts []string
	if len(over) > 0 {
		named := make([]string, len(over))
		for i, c := range over {
			named[i] = c
			if m, ok := measures[c]; ok && m.LegacyObjects != nil {
				named[i] = fmt.Sprintf("%s (%d)", c, *m.LegacyObjects)
			}
		}
		parts = append(parts, fmt.Sprintf("Kyverno legacy objects in %s, at most %d per cluster allowed", strings.Join(named, ", "), *limit))
	}
	if len(unknown) > 0 {
		parts = append(parts, "no legacy inventory reported by "+strings.Join(unknown, ", "))
	}
	if len(parts) == 0 {
		return false, ""
	}
	return true, fmt.Sprintf("%d legacy objects in the wave: %s", sum, strings.Join(parts, "; "))
}

// unreported lists the clusters without a fresh measure, sorted.
func unreported(clusters []string, measures map[string]Measure) []string {
	return clustersWhere(clusters, measures, func(m Measure) bool { return !m.Fresh })
}

// unsynced lists the clusters that do not hold what their wave wants yet, sorted.
func unsynced(clusters []string, measures map[string]Measure) []string {
	return clustersWhere(clusters, measures, func(m Measure) bool { return !m.Synced })
}

// clustersWhere lists the clusters whose measure matches, sorted; at most a few are named.
func clustersWhere(clusters []string, measures map[string]Measure, match func(Measure) bool) []string {
	var out []string
	for _, c := range clusters {
		if match(measures[c]) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	if len(out) > maxNamed {
		out = append(out[:maxNamed], fmt.Sprintf("%d more", len(out)-maxNamed))
	}
	return out
}

// maxNamed bounds the clusters a reason names: a wave may have a thousand.
const maxNamed = 5

func setModes(modes map[string]policyhubv1.Mode, clusters []string, mode policyhubv1.Mode) {
	for _, c := range clusters {
		modes[c] = mode
	}
}
