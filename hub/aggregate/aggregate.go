package aggregate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// DefaultHeartbeat is the heartbeat assumed for a summary that does not say its agent's.
const DefaultHeartbeat = time.Minute

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
	// ReportTime is when the agent generated the summary.
	ReportTime *metav1.Time
	Stale      bool
	// OldestResult is when the oldest result of the policies was made (zero when none says).
	OldestResult time.Time
	// Unlisted are how many of the policies the summary has no entry for: Kyverno reported
	// nothing for them (yet), or the agent cut them.
	Unlisted int
}

// ForPolicies sums the summary's results of the given policies. A summary entry without a kind
// (a report that did not say) matches by namespace and name.
func ForPolicies(s *policyhubv1.PolicyReportSummarySpec, policies []Policy, now time.Time) Results {
	r := Results{ReportTime: s.GeneratedAt.DeepCopy(), Stale: Stale(s, now)}
	// Called per cluster and declaration on every status: no allocation for the usual few policies.
	var few [8]bool
	listed := few[:min(len(policies), len(few))]
	if len(policies) > len(few) {
		listed = make([]bool, len(policies))
	}
	for _, p := range s.Policies {
		i := match(p, policies)
		if i < 0 {
			continue
		}
		listed[i] = true
		Add(&r.Counts, p.Results)
		r.Blocked += p.Blocked
		if p.OldestResult != nil && (r.OldestResult.IsZero() || p.OldestResult.Time.Before(r.OldestResult)) {
			r.OldestResult = p.OldestResult.Time
		}
	}
	for _, l := range listed {
		if !l {
			r.Unlisted++
		}
	}
	return r
}

// match is the index of the policy the summary entry is about, or -1.
func match(p policyhubv1.PolicySummary, policies []Policy) int {
	for i, want := range policies {
		if p.Name == want.Name && p.Namespace == want.Namespace && (p.Kind == "" || p.Kind == want.Kind) {
			return i
		}
	}
	return -1
}

// Add adds b's counts to a.
func Add(a *policyhubv1.ResultCounts, b policyhubv1.ResultCounts) {
	a.Pass += b.Pass
	a.Fail += b.Fail
	a.Warn += b.Warn
	a.Error += b.Error
	a.Skip += b.Skip
}

// Heartbeat is the summary's agent heartbeat interval.
func Heartbeat(s *policyhubv1.PolicyReportSummarySpec) time.Duration {
	if s.HeartbeatInterval != nil && s.HeartbeatInterval.Duration > 0 {
		return s.HeartbeatInterval.Duration
	}
	return DefaultHeartbeat
}

// StaleAt is when the summary becomes stale: three missed heartbeats after it was generated.
// A summary without generatedAt is stale from the start.
func StaleAt(s *policyhubv1.PolicyReportSummarySpec) time.Time {
	if s.GeneratedAt == nil {
		return time.Time{}
	}
	return s.GeneratedAt.Add(staleAfter * Heartbeat(s))
}

// Stale says whether the summary's agent has missed three heartbeats at now.
func Stale(s *policyhubv1.PolicyReportSummarySpec, now time.Time) bool {
	return !now.Before(StaleAt(s))
}

// Age is how old the summary is at now (zero without generatedAt).
func Age(s *policyhubv1.PolicyReportSummarySpec, now time.Time) time.Duration {
	if s.GeneratedAt == nil {
		return 0
	}
	return now.Sub(s.GeneratedAt.Time)
}
