package aggregate

import (
	"fmt"
	"strings"
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
}

// ForPolicies sums the summary's results of the given policies. A summary entry without a kind
// (a report that did not say) matches by namespace and name.
func ForPolicies(s *policyhubv1.PolicyReportSummarySpec, policies []Policy, now time.Time) Results {
	r := Results{ReportTime: s.GeneratedAt.DeepCopy(), Stale: Stale(s, now)}
	for _, p := range s.Policies {
		if !matches(p, policies) {
			continue
		}
		Add(&r.Counts, p.Results)
		r.Blocked += p.Blocked
	}
	return r
}

func matches(p policyhubv1.PolicySummary, policies []Policy) bool {
	for _, want := range policies {
		if p.Name == want.Name && p.Namespace == want.Namespace && (p.Kind == "" || p.Kind == want.Kind) {
			return true
		}
	}
	return false
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

// Validate refuses a summary that claims another cluster than the hub namespace it was written
// to: an agent may write only its own namespace, so a mismatch is a misconfigured or a forged
// summary, and aggregating it would report one cluster's compliance as another's.
func Validate(namespace string, s *policyhubv1.PolicyReportSummarySpec) error {
	if s.Cluster != namespace {
		return fmt.Errorf("spec.cluster %q does not match the namespace %q the summary was written to: each cluster's agent writes only its own namespace, so this summary is not aggregated", s.Cluster, namespace)
	}
	return nil
}

// SeverityRank orders Kyverno's severities (policies.kyverno.io/severity), most severe first;
// unknown ones last.
func SeverityRank(s string) int {
	switch strings.ToLower(s) {
	case "critical":
		return 0
	case "high":
		return 1
	case "medium":
		return 2
	case "low":
		return 3
	case "info":
		return 4
	}
	return 5
}
