package aggregate

import (
	"math"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// DefaultHeartbeat is the heartbeat assumed for a summary that does not say its agent's.
const DefaultHeartbeat = time.Minute

// MaxHeartbeat is the longest heartbeat the hub takes from a summary: an agent that said "a
// year" and stopped would otherwise never turn stale.
const MaxHeartbeat = time.Hour

// staleAfter is how many heartbeats a summary may miss before its results are called stale.
const staleAfter = 3

// Policy names one policy object in a cluster, e.g. one a declaration owns there.
type Policy struct {
	Kind, Namespace, Name string
}

// Results is what a summary says about a set of policies.
type Results struct {
	Counts  policyhubv1.ResultCounts
	Blocked int64
	// BlockedIncludesDryRuns: Blocked may count server-side dry-runs (DryRunsIncluded).
	BlockedIncludesDryRuns bool
	// ReportTime is when the hub received the summary, by the hub's clock (see ObservedAt).
	ReportTime *metav1.Time
	// Stale: the hub's summary controller judged the cluster's agent silent (see JudgedStale).
	Stale bool
	// Observed is when the hub saw the summary's current generation, by its own clock; zero
	// until it has (its summary controller records it within moments of each push).
	Observed time.Time
	// OldestResult is when the oldest result of the policies was made (zero when none says), by
	// the hub's clock once the summary was observed: Kyverno's time, less the cluster's clock
	// offset measured then (see ClockOffset).
	OldestResult time.Time
	// Unlisted are how many of the policies the summary has no entry for: Kyverno reported
	// nothing for them (yet), or the agent cut them.
	Unlisted int
}

// ForPolicies sums the summary's results of the given policies. A summary entry without a kind
// (a report that did not say) matches by namespace and name. Whatever the summary holds (an
// older CRD may have let anything through), counts are never negative and never wrap, and a
// policy listed twice counts once, as its first entry says.
func ForPolicies(s *policyhubv1.PolicyReportSummary, policies []Policy, now time.Time) Results {
	at, observed := ObservedAt(s, now)
	r := Results{Stale: JudgedStale(s)}
	if !at.IsZero() {
		// Whole seconds, as the API stores a metav1.Time: a status compared with what was read
		// back must not differ in what cannot be stored (that would be a write changing nothing).
		r.ReportTime = &metav1.Time{Time: at.Truncate(time.Second)}
	}
	offset, _ := ClockOffset(s)
	if observed {
		r.Observed = at
	}
	// Called per cluster and declaration on every status: no allocation for the usual few policies.
	var few [8]bool
	listed := few[:min(len(policies), len(few))]
	if len(policies) > len(few) {
		listed = make([]bool, len(policies))
	}
	EachPolicy(s, policies, func(m int, p *policyhubv1.PolicySummary) {
		listed[m] = true
		Add(&r.Counts, p.Results)
		r.Blocked = AddCount(r.Blocked, p.Blocked)
		r.BlockedIncludesDryRuns = r.BlockedIncludesDryRuns || (p.Blocked > 0 && DryRunsIncluded(s, p))
		if p.OldestResult != nil {
			if oldest := p.OldestResult.Add(-offset); r.OldestResult.IsZero() || oldest.Before(r.OldestResult) {
				r.OldestResult = oldest
			}
		}
	})
	for _, l := range listed {
		if !l {
			r.Unlisted++
		}
	}
	return r
}

// DryRunsIncluded says whether the summary's blocked count of p may include server-side
// dry-runs: the agent counts them apart only for the legacy kinds (Kyverno's metric of the CEL
// kinds does not mark them), and only when it could read Kyverno's metrics (an agent older
// than the field says nothing: included).
func DryRunsIncluded(s *policyhubv1.PolicyReportSummary, p *policyhubv1.PolicySummary) bool {
	if p.Kind != "ClusterPolicy" && p.Kind != "Policy" {
		return true
	}
	k := s.Spec.Engine.Kyverno
	return k == nil || k.DryRunsCounted == nil || !*k.DryRunsCounted
}

// EachPolicy calls fn with each summary entry about one of the policies, and that policy's index:
// an entry without a kind matches by namespace and name, and a policy listed twice counts once,
// as its first entry says.
func EachPolicy(s *policyhubv1.PolicyReportSummary, policies []Policy, fn func(i int, p *policyhubv1.PolicySummary)) {
	var seenFew [8]policyhubv1.PolicySummaryKey
	seen := seenFew[:0]
	for i := range s.Spec.Policies {
		p := &s.Spec.Policies[i]
		m := match(p, policies)
		if m < 0 {
			continue
		}
		key := p.Key()
		if slices.Contains(seen, key) {
			continue
		}
		seen = append(seen, key)
		fn(m, p)
	}
}

// match is the index of the policy the summary entry is about, or -1.
func match(p *policyhubv1.PolicySummary, policies []Policy) int {
	for i, want := range policies {
		if p.Name == want.Name && p.Namespace == want.Namespace && (p.Kind == "" || p.Kind == want.Kind) {
			return i
		}
	}
	return -1
}

// Add adds b's counts to a, as AddCount does.
func Add(a *policyhubv1.ResultCounts, b policyhubv1.ResultCounts) {
	a.Pass = AddCount(a.Pass, b.Pass)
	a.Fail = AddCount(a.Fail, b.Fail)
	a.Warn = AddCount(a.Warn, b.Warn)
	a.Error = AddCount(a.Error, b.Error)
	a.Skip = AddCount(a.Skip, b.Skip)
}

// AddCount adds count b to a: a negative b counts as 0 (it would cancel other clusters' counts
// in a sum), and the sum stops at the largest int64 instead of wrapping to a negative.
func AddCount(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Heartbeat is the summary's agent heartbeat interval, at most MaxHeartbeat: the longer of the
// one its agent says it renews at (spec, DefaultHeartbeat when it says none) and the one the hub
// published to it (status.pacing), so an agent that took a longer published heartbeat is not
// judged silent before its agent said so, nor one still at its own longer one before it moves.
// The cap holds for both: the spec is the agent's to write, and the status holds whatever the
// status subresource's writers put there.
func Heartbeat(s *policyhubv1.PolicyReportSummary) time.Duration {
	beat := DefaultHeartbeat
	if h := s.Spec.HeartbeatInterval; h != nil && h.Duration > 0 {
		beat = h.Duration
	}
	if p := s.Status.Pacing; p != nil && p.HeartbeatInterval.Duration > beat {
		beat = p.HeartbeatInterval.Duration
	}
	return min(beat, MaxHeartbeat)
}

// PushInterval is the least time the hub asked the summary's agent to leave between two pushes
// (status.pacing, the hub's own; at least policyhubv1.MinPushInterval, at most MaxHeartbeat): how
// long a change may wait in the agent before the hub sees it, once the agent's reserve of
// urgent pushes is spent.
func PushInterval(s *policyhubv1.PolicyReportSummary) time.Duration {
	push := policyhubv1.MinPushInterval
	if s == nil {
		return push
	}
	if p := s.Status.Pacing; p != nil && p.PushInterval.Duration > push {
		push = p.PushInterval.Duration
	}
	return min(push, MaxHeartbeat)
}

// ObservedAt is when the hub saw the summary's current generation, by the hub's clock, and
// whether it has. Until it has (its summary controller records status.observedTime within
// moments of each push), the agent's generatedAt stands in. Either is never later than now: a
// cluster clock running ahead must not make a summary look fresh (nor another hub replica's
// clock). Zero when neither is known.
func ObservedAt(s *policyhubv1.PolicyReportSummary, now time.Time) (time.Time, bool) {
	if t := s.Status.ObservedTime; t != nil && s.Status.ObservedGeneration == s.Generation {
		return notAfter(t.Time, now), true
	}
	if s.Spec.GeneratedAt == nil {
		return time.Time{}, false
	}
	return notAfter(s.Spec.GeneratedAt.Time, now), false
}

func notAfter(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}

// ClockOffset is how far the cluster's clock is ahead of the hub's (negative: behind), as
// measured when the hub observed the summary's current generation: generatedAt less
// observedTime. It also holds the push's latency (the agent stamps generatedAt just before it
// pushes), so it reads a little behind. False when the hub has not observed it, or the summary
// has no generatedAt.
func ClockOffset(s *policyhubv1.PolicyReportSummary) (time.Duration, bool) {
	t := s.Status.ObservedTime
	if t == nil || s.Status.ObservedGeneration != s.Generation || s.Spec.GeneratedAt == nil {
		return 0, false
	}
	return s.Spec.GeneratedAt.Sub(t.Time), true
}

// ClockSkewLimit is how far generatedAt may be from when the hub saw the summary before the hub
// says the cluster's clock is off: two minutes, and a heartbeat for the summary's way to the hub
// (the push, and the hub's queue of summaries to look at).
func ClockSkewLimit(s *policyhubv1.PolicyReportSummary) time.Duration {
	return 2*time.Minute + Heartbeat(s)
}

// LastHeard is when the hub last heard from the summary's agent, by the hub's clock: when it saw
// the summary (ObservedAt) or, later, the agent's Lease renewed (heard; zero when not heard). A
// Lease renewal says "alive, nothing new": it keeps the results fresh without being content, so a
// quiet agent rewrites nothing on the hub. Never later than now; zero when neither is known.
func LastHeard(s *policyhubv1.PolicyReportSummary, heard, now time.Time) time.Time {
	at, _ := ObservedAt(s, now)
	if heard = notAfter(heard, now); heard.After(at) {
		return heard
	}
	return at
}

// StaleAt is when the summary becomes stale: three missed heartbeats after the hub last heard
// from its agent (see LastHeard). A summary the hub cannot date is stale from the start.
func StaleAt(s *policyhubv1.PolicyReportSummary, heard, now time.Time) time.Time {
	at := LastHeard(s, heard, now)
	if at.IsZero() {
		return time.Time{}
	}
	return at.Add(staleAfter * Heartbeat(s))
}

// JudgedStale says whether the hub's summary controller judged the summary's agent silent (Ready
// False, reason Stale) for its current generation. That verdict is the one judgement of liveness
// the rest of the hub reads: the controller watches the agents' Leases and writes the verdict
// only when it changes, so what depends on it (declarations' status) moves only then, never with
// each renewal. A new generation is content just pushed: fresh until judged.
func JudgedStale(s *policyhubv1.PolicyReportSummary) bool {
	c := apimeta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady)
	return c != nil && c.ObservedGeneration == s.Generation && c.Status == metav1.ConditionFalse && c.Reason == policyhubv1.ReasonStale
}

// Stale says whether the summary's agent has missed three heartbeats at now, heard being when the
// hub last saw its Lease renewed (zero: not heard).
func Stale(s *policyhubv1.PolicyReportSummary, heard, now time.Time) bool {
	return !now.Before(StaleAt(s, heard, now))
}

// Age is how long before now the hub last heard from the summary's agent (zero when it cannot
// date it, and never negative).
func Age(s *policyhubv1.PolicyReportSummary, heard, now time.Time) time.Duration {
	at := LastHeard(s, heard, now)
	if at.IsZero() {
		return 0
	}
	return max(now.Sub(at), 0)
}
