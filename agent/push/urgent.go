package push

import (
	"k8s.io/apimachinery/pkg/api/equality"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// urgent says whether next, compared with prev (the summary last pushed; nil: none), changes
// something the hub must show at once, so it may be pushed ahead of the cluster's share of the
// hub (SummaryPacing.PushInterval), from the reserve of UrgentPushes:
//   - the fail, error or blocked count of any policy, of any application, or in total (what
//     compliance, alerts and a rollout's health are judged by);
//   - the policies listed (by name, namespace and kind): a policy arriving in, or leaving, the
//     cluster is what a rollout waits to see;
//   - the shadows listed (by name, namespace, kind and content hash): a preview waits for each
//     cluster to list the shadow of its candidate;
//   - the engine facts (spec.engine): which kinds the cluster enforces decides what the hub
//     writes there;
//   - what was truncated: the hub must not take a cut summary for a complete one.
//
// Everything else waits for the share (it is deferred, never lost: the push then carries the
// latest build): pass, warn and skip counts, result times (oldestResult, lastBlocked's time),
// titles, categories and severities, namespaces' counts (they are the policies' counts again,
// by namespace), exceptions (skip and pass results), shadows' counts (a preview waits for them
// to settle, minutes), and the violations list. A violation listed or dropped without a fail or
// error count moving is a message, a resource or the order changing: the same findings, re-read
// (a report rewritten, a resource relabelled); a new finding moves a count and is pushed with
// it. A rollout waiting for oldestResult to pass a policy's arrival waits at most one share more:
// the arrival itself (the policy listed, its counts) goes ahead.
func urgent(prev *policyhubv1.PolicyReportSummarySpec, next policyhubv1.PolicyReportSummarySpec) bool {
	if prev == nil {
		return true
	}
	p := *prev
	if p.Totals.Fail != next.Totals.Fail || p.Totals.Error != next.Totals.Error || p.Blocked != next.Blocked {
		return true
	}
	if !equality.Semantic.DeepEqual(p.Engine, next.Engine) || truncation(p.Truncated) != truncation(next.Truncated) {
		return true
	}
	if !sameKeyed(p.Policies, next.Policies, policyKey, policyAlarms, true) {
		return true
	}
	// Applications are listed by the results they have (pass only too): one listed or dropped
	// with no fail, error or blocked count is not urgent.
	if !sameKeyed(p.Applications, next.Applications, applicationKey, applicationAlarms, false) {
		return true
	}
	return !sameKeyed(p.Shadows, next.Shadows, shadowKey, func(policyhubv1.ShadowResults) alarms { return alarms{} }, true)
}

// alarms are the counts of an entry whose change is urgent.
type alarms struct{ fail, error, blocked int64 }

func (a alarms) zero() bool { return a == alarms{} }

func policyKey(p policyhubv1.PolicySummary) [3]string { return [3]string{p.Name, p.Namespace, p.Kind} }
func policyAlarms(p policyhubv1.PolicySummary) alarms {
	return alarms{p.Results.Fail, p.Results.Error, p.Blocked}
}

func applicationKey(a policyhubv1.ApplicationSummary) [3]string {
	return [3]string{a.Namespace, a.Name, a.Policy}
}
func applicationAlarms(a policyhubv1.ApplicationSummary) alarms {
	return alarms{a.Results.Fail, a.Results.Error, a.Blocked}
}

// shadowKey includes the content hash: a new version of the candidate is a new shadow.
func shadowKey(s policyhubv1.ShadowResults) [4]string {
	return [4]string{s.Name, s.Namespace, s.Kind, s.ContentHash}
}

// sameKeyed says whether prev and next hold the same alarms under the same keys. With setMatters,
// an entry listed in one and not the other differs whatever its counts; without, only when its
// alarms are not all zero. Duplicate keys (the CRD refuses them) count once, the last winning.
func sameKeyed[E any, K comparable](prev, next []E, key func(E) K, alarm func(E) alarms, setMatters bool) bool {
	before := make(map[K]alarms, len(prev))
	for _, e := range prev {
		before[key(e)] = alarm(e)
	}
	seen := make(map[K]bool, len(next))
	for _, e := range next {
		k, a := key(e), alarm(e)
		seen[k] = true
		old, listed := before[k]
		if !listed {
			if setMatters || !a.zero() {
				return false
			}
			continue
		}
		if old != a {
			return false
		}
	}
	for k, a := range before {
		if !seen[k] && (setMatters || !a.zero()) {
			return false
		}
	}
	return true
}

// truncation is t, or nothing cut when absent.
func truncation(t *policyhubv1.Truncation) policyhubv1.Truncation {
	if t == nil {
		return policyhubv1.Truncation{}
	}
	return *t
}
