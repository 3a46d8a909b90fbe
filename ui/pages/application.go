package pages

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/ui/read"
)

// MaxApplicationExceptions bounds the exceptions an application's page lists.
const MaxApplicationExceptions = 10

// Application is an application's page, and what `kubectl policyhub info` reports: its results in
// each cluster by policy, its ApplicationPolicies, their top violations and last refusals, and
// the exceptions in force in its namespace.
type Application struct {
	Namespace, Name string
	Totals          policyhubv1.ResultCounts
	// PassUnknown: a cluster counted does not report pass results (Kyverno's --allowedResults),
	// so Totals.Pass is not the application's: it is shown as unknown, never as a count.
	PassUnknown         bool
	Violations, Blocked int64
	Results             []ApplicationResult
	ApplicationPolicies []string
	// TopViolations are the ApplicationPolicies' top violations, each once, most severe first,
	// then newest first.
	TopViolations []policyhubv1.Violation
	Refusals      []Refusal
	// Exceptions are the active exceptions whose resources are in the namespace, the first to end
	// first, at most MaxApplicationExceptions.
	Exceptions []Exception
}

// ApplicationResult is the application's results for one policy in one cluster.
type ApplicationResult struct {
	Cluster, Policy string
	Results         policyhubv1.ResultCounts
	Violations      int64
	Blocked         int64
	// PassUnknown: the cluster's Kyverno writes no pass results; Results.Pass is not a count.
	PassUnknown bool
	// ReportTime is when the hub saw the cluster's summary, by the hub's clock (zero: unknown).
	ReportTime time.Time
	Stale      bool
}

// Refusal is an admission of the application's a generated policy refused, the last one.
type Refusal struct {
	Cluster, Policy string
	Count           int64
	Resource        *policyhubv1.ResourceRef
	Message         string
	At              time.Time
}

// ApplicationInput is what an application's page is computed from.
type ApplicationInput struct {
	Namespace, Name string
	// Summaries are the clusters' summaries, each in its cluster's namespace.
	Summaries []*policyhubv1.PolicyReportSummary
	// ApplicationPolicies and Exceptions may hold others: the application's are picked.
	ApplicationPolicies []*policyhubv1.ApplicationPolicy
	Exceptions          []*policyhubv1.FleetPolicyException
	// Stale says whether a summary's agent is silent (aggregate.JudgedStale when nil).
	Stale func(*policyhubv1.PolicyReportSummary) bool
	Now   time.Time
}

// ApplicationFrom is the input of application name in namespace from a snapshot.
func ApplicationFrom(s *read.Snapshot, namespace, name string) ApplicationInput {
	in := ApplicationInput{Namespace: namespace, Name: name, Now: s.Now}
	for i := range s.Summaries {
		in.Summaries = append(in.Summaries, &s.Summaries[i])
	}
	for i := range s.ApplicationPolicies {
		in.ApplicationPolicies = append(in.ApplicationPolicies, &s.ApplicationPolicies[i])
	}
	for i := range s.Exceptions {
		in.Exceptions = append(in.Exceptions, &s.Exceptions[i])
	}
	return in
}

// BuildApplication gathers the application's results from the clusters' summaries and its
// ApplicationPolicies. The summaries are the source of the results; an ApplicationPolicy's own
// per-policy results fill in what a summary left out (a truncated one).
func BuildApplication(in ApplicationInput) *Application {
	stale := in.Stale
	if stale == nil {
		stale = aggregate.JudgedStale
	}
	a := &Application{Namespace: in.Namespace, Name: in.Name}
	type key struct{ cluster, policy string }
	results := map[key]*ApplicationResult{}
	byCluster := map[string]*policyhubv1.PolicyReportSummary{}
	for _, sum := range in.Summaries {
		byCluster[sum.Namespace] = sum
		for _, row := range sum.Spec.Applications {
			if row.Namespace != in.Namespace || row.Name != in.Name {
				continue
			}
			k := key{sum.Namespace, row.Policy}
			r := results[k]
			if r == nil {
				r = &ApplicationResult{Cluster: sum.Namespace, Policy: row.Policy, Stale: stale(sum),
					PassUnknown: !sum.Spec.Engine.ReportsResult("pass")}
				r.ReportTime, _ = aggregate.ObservedAt(sum, in.Now)
				results[k] = r
			}
			aggregate.Add(&r.Results, row.Results)
			r.Blocked = aggregate.AddCount(r.Blocked, row.Blocked)
		}
	}
	seen := map[string]bool{}
	for _, ap := range in.ApplicationPolicies {
		if ap.Namespace != in.Namespace || ap.Spec.Application != in.Name {
			continue
		}
		a.ApplicationPolicies = append(a.ApplicationPolicies, ap.Name)
		for _, p := range ap.Status.Policies {
			// The status names a generated policy by name; the summaries, like this page, name a
			// namespaced policy namespace/name.
			sum := byCluster[p.Cluster]
			k := key{p.Cluster, GeneratedPolicyRef(sum, ap.Namespace, p.Policy)}
			if r, ok := results[k]; ok {
				// A generated policy matches only the application's resources, so all its refusals
				// are the application's, also those the agent could not attribute (a refused
				// create leaves no object to read the application label from).
				r.Blocked = max(r.Blocked, p.Blocked)
			} else {
				r := &ApplicationResult{Cluster: p.Cluster, Policy: k.policy, Results: p.Results, Blocked: p.Blocked}
				if sum != nil { // a summary that left the policy out (truncated)
					r.Stale, r.PassUnknown = stale(sum), !sum.Spec.Engine.ReportsResult("pass")
					r.ReportTime, _ = aggregate.ObservedAt(sum, in.Now)
				}
				results[k] = r
			}
			if b := p.LastBlocked; b != nil {
				ref := Refusal{Cluster: p.Cluster, Policy: k.policy, Count: p.Blocked, Resource: b.Resource, Message: b.Message}
				if b.Time != nil {
					ref.At = b.Time.Time
				}
				a.Refusals = append(a.Refusals, ref)
			}
		}
		for _, v := range ap.Status.TopViolations {
			id := strings.Join([]string{v.Cluster, v.Policy, v.Rule, v.Result, ResourceText(v.Resource)}, "\x00")
			if !seen[id] {
				seen[id] = true
				a.TopViolations = append(a.TopViolations, v)
			}
		}
	}
	for _, r := range results {
		r.Violations = aggregate.AddCount(r.Results.Fail, r.Results.Error)
		aggregate.Add(&a.Totals, r.Results)
		a.PassUnknown = a.PassUnknown || r.PassUnknown
		a.Blocked = aggregate.AddCount(a.Blocked, r.Blocked)
		a.Results = append(a.Results, *r)
	}
	a.Violations = aggregate.AddCount(a.Totals.Fail, a.Totals.Error)
	slices.SortFunc(a.Results, func(x, y ApplicationResult) int {
		return cmp.Or(strings.Compare(x.Cluster, y.Cluster), strings.Compare(x.Policy, y.Policy))
	})
	slices.Sort(a.ApplicationPolicies)
	slices.SortFunc(a.TopViolations, compareViolations)
	slices.SortFunc(a.Refusals, func(x, y Refusal) int {
		return cmp.Or(strings.Compare(x.Cluster, y.Cluster), strings.Compare(x.Policy, y.Policy))
	})
	a.Exceptions = exceptionsIn(in.Exceptions, in.Namespace)
	return a
}

// GeneratedPolicyRef is how the cluster's summary names the ApplicationPolicy's generated policy
// name: namespace/name, with the namespace the summary knows it in (the application's, when
// several); the ApplicationPolicy's namespace when the summary does not list the policy.
func GeneratedPolicyRef(s *policyhubv1.PolicyReportSummary, apNamespace, name string) string {
	namespace := ""
	if s != nil {
		for _, p := range s.Spec.Policies {
			if p.Name == name && p.Namespace != "" && (namespace == "" || p.Namespace == apNamespace) {
				namespace = p.Namespace
			}
		}
	}
	return policyhubv1.PolicyRef(cmp.Or(namespace, apNamespace), name)
}

// compareViolations orders violations most severe first, then newest first, then by cluster,
// policy, resource and rule, so that the order never depends on the sources' order.
func compareViolations(a, b policyhubv1.Violation) int {
	if c := cmp.Compare(policyhubv1.SeverityRank(a.Severity), policyhubv1.SeverityRank(b.Severity)); c != 0 {
		return c
	}
	var at, bt time.Time
	if a.Timestamp != nil {
		at = a.Timestamp.Time
	}
	if b.Timestamp != nil {
		bt = b.Timestamp.Time
	}
	if c := bt.Compare(at); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Policy, b.Policy),
		strings.Compare(ResourceText(a.Resource), ResourceText(b.Resource)), strings.Compare(a.Rule, b.Rule), strings.Compare(a.Result, b.Result))
}

// exceptionsIn are the active exceptions whose resources are in namespace: they name it (or a
// pattern matching it), or name no namespace and are the namespace's own (a tenant's exception
// without namespaces is confined to its own). The first to end first, at most
// MaxApplicationExceptions.
func exceptionsIn(all []*policyhubv1.FleetPolicyException, namespace string) []Exception {
	var out []Exception
	for _, ex := range all {
		if ex.Status.State != policyhubv1.ExceptionActive {
			continue
		}
		names := ex.Spec.Resources.Namespaces
		applies := len(names) == 0 && ex.Namespace == namespace
		for _, n := range names {
			if ok, _ := path.Match(n, namespace); ok {
				applies = true
			}
		}
		if applies {
			out = append(out, exceptionOf(ex))
		}
	}
	slices.SortFunc(out, func(a, b Exception) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	if len(out) > MaxApplicationExceptions {
		out = out[:MaxApplicationExceptions]
	}
	return out
}

// ResourceText names a resource for a page: Kind namespace/name.
func ResourceText(r policyhubv1.ResourceRef) string {
	return r.Kind + " " + policyhubv1.PolicyRef(r.Namespace, r.Name)
}
