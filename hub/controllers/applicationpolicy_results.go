package controllers

import (
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/engine"
)

// Bounds of an ApplicationPolicy's status (the CRD's MaxItems).
const (
	maxApplicationPolicyResults = 100
	maxTopViolations            = 20
)

// applicationResults is an application's own results in each cluster, from the agents'
// per-application breakdown: per generated policy (counts, and the policy's refused admissions,
// which are all the application's, since a generated policy matches only its resources), and the
// top violations of those policies. In each cluster this replica works (read) they are set in
// its state, with its results set to the application's totals; the status's are merged from
// every cluster's state (another replica's as it wrote them). An entry a summary lists twice
// counts once (its first), and no count is negative.
func applicationResults(app string, clusters []policyhubv1.ClusterStatus, read engine.SummaryRead, owned map[string][]aggregate.Policy, now time.Time) ([]policyhubv1.ApplicationPolicyResult, []policyhubv1.Violation) {
	var results []policyhubv1.ApplicationPolicyResult
	var violations [][]policyhubv1.Violation // by cluster, in the clusters' order
	for i := range clusters {
		c := &clusters[i]
		if !read.Unread[c.Name] {
			c.ApplicationResults, c.Violations = nil, nil
			if s, ok := read.Summaries[c.Name]; ok {
				c.ApplicationResults, c.Violations = clusterApplicationResults(app, c, s, owned[c.Name], now)
			}
		}
		results = append(results, c.ApplicationResults...)
		violations = append(violations, c.Violations)
	}
	sort.SliceStable(results, func(i, j int) bool {
		if results[i].Cluster != results[j].Cluster {
			return results[i].Cluster < results[j].Cluster
		}
		return results[i].Policy < results[j].Policy
	})
	if len(results) > maxApplicationPolicyResults {
		results = results[:maxApplicationPolicyResults]
	}
	return results, topViolations(violations, maxTopViolations, now)
}

// clusterApplicationResults are the application's results in the cluster c from its summary s,
// per policy of those owned there (sorted, at most maxApplicationPolicyResults), and its top
// violations there (at most maxTopViolations); c's results are set to their totals.
func clusterApplicationResults(app string, c *policyhubv1.ClusterStatus, s *policyhubv1.PolicyReportSummary, owned []aggregate.Policy, now time.Time) ([]policyhubv1.ApplicationPolicyResult, []policyhubv1.Violation) {
	total := policyhubv1.ResultCounts{}
	var blocked int64
	var results []policyhubv1.ApplicationPolicyResult
	refs := map[string]bool{}
	for _, p := range owned {
		ref := policyhubv1.PolicyRef(p.Namespace, p.Name)
		refs[ref] = true
		r := applicationPolicyResult(app, c.Name, p, &s.Spec)
		aggregate.Add(&total, r.Results)
		blocked = aggregate.AddCount(blocked, r.Blocked)
		results = append(results, r)
	}
	var own []policyhubv1.Violation
	for _, v := range s.Spec.Violations {
		if refs[v.Policy] {
			v.Cluster = c.Name
			own = append(own, v)
		}
	}
	c.Results, c.Blocked = &total, blocked
	sort.SliceStable(results, func(i, j int) bool { return results[i].Policy < results[j].Policy })
	return results[:min(len(results), maxApplicationPolicyResults)], topViolations([][]policyhubv1.Violation{own}, maxTopViolations, now)
}

// applicationPolicyResult is one generated policy's results for the application in a cluster.
func applicationPolicyResult(app, cluster string, p aggregate.Policy, s *policyhubv1.PolicyReportSummarySpec) policyhubv1.ApplicationPolicyResult {
	r := policyhubv1.ApplicationPolicyResult{Cluster: cluster, Policy: p.Name}
	ref := policyhubv1.PolicyRef(p.Namespace, p.Name)
	var seenApps []string // namespaces of the application's entries for the policy: each counts once
	for i := range s.Applications {
		a := &s.Applications[i]
		if a.Name != app || a.Policy != ref || slices.Contains(seenApps, a.Namespace) {
			continue
		}
		seenApps = append(seenApps, a.Namespace)
		aggregate.Add(&r.Results, a.Results)
	}
	var seenPolicies []policyhubv1.PolicySummaryKey
	for i := range s.Policies {
		ps := &s.Policies[i]
		if ps.Name != p.Name || ps.Namespace != p.Namespace || (ps.Kind != "" && ps.Kind != p.Kind) || slices.Contains(seenPolicies, ps.Key()) {
			continue
		}
		seenPolicies = append(seenPolicies, ps.Key())
		r.Blocked = aggregate.AddCount(r.Blocked, ps.Blocked)
		if ps.LastBlocked != nil {
			r.LastBlocked = ps.LastBlocked.DeepCopy()
		}
	}
	return r
}

// topViolations keeps at most n of the clusters' violations (given by cluster, in a stable
// order), fairly: each cluster's own are ranked most severe and newest first, and the clusters
// take turns, so that no cluster can push the others out, however many and however severe its
// own violations say they are. What is kept is then shown most severe and newest first (turn
// order among equals). A time later than now counts as now: a cluster's clock, or agent, must not
// make its violations the newest.
func topViolations(byCluster [][]policyhubv1.Violation, n int, now time.Time) []policyhubv1.Violation {
	less := func(a, b *policyhubv1.Violation) bool {
		if ra, rb := policyhubv1.SeverityRank(a.Severity), policyhubv1.SeverityRank(b.Severity); ra != rb {
			return ra < rb
		}
		ta, tb := rankTime(a.Timestamp, now), rankTime(b.Timestamp, now)
		return ta.After(tb)
	}
	ranked := make([][]policyhubv1.Violation, len(byCluster))
	for i, vs := range byCluster {
		vs = slices.Clone(vs)
		sort.SliceStable(vs, func(a, b int) bool { return less(&vs[a], &vs[b]) })
		ranked[i] = vs[:min(len(vs), n)]
	}
	var out []policyhubv1.Violation
	for turn := 0; len(out) < n; turn++ {
		took := false
		for _, vs := range ranked {
			if turn < len(vs) && len(out) < n {
				out = append(out, vs[turn])
				took = true
			}
		}
		if !took {
			break
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return less(&out[a], &out[b]) })
	return out
}

// rankTime is a violation's time for ranking: never later than now, and the zero time when it
// has none (oldest).
func rankTime(t *metav1.Time, now time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	if t.After(now) {
		return now
	}
	return t.Time
}
