package pages

import (
	"cmp"
	"slices"
	"strings"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/ui/read"
)

// Application is an application's page, as `kubectl policyhub info` reports it: its results in
// each cluster by policy, its ApplicationPolicies, their top violations and last refusals, and
// the exceptions in force in its namespace.
type Application struct {
	Namespace, Name     string
	Totals              policyhubv1.ResultCounts
	Violations, Blocked int64
	Results             []ApplicationResult
	ApplicationPolicies []string
	TopViolations       []policyhubv1.Violation
	Refusals            []Refusal
	Exceptions          []Exception
}

// ApplicationResult is the application's results for one policy in one cluster.
type ApplicationResult struct {
	Cluster, Policy string
	Results         policyhubv1.ResultCounts
	Violations      int64
	Blocked         int64
	Stale           bool
}

// Refusal is an admission of the application's a generated policy refused, the last one.
type Refusal struct {
	Cluster, Policy string
	Count           int64
	Resource        string
	Message         string
	At              time.Time
}

// BuildApplication computes the page of application name in namespace.
func BuildApplication(s *read.Snapshot, namespace, name string) *Application {
	a := &Application{Namespace: namespace, Name: name}
	type key struct{ cluster, policy string }
	results := map[key]*ApplicationResult{}
	for i := range s.Summaries {
		sum := &s.Summaries[i]
		for _, row := range sum.Spec.Applications {
			if row.Namespace != namespace || row.Name != name {
				continue
			}
			k := key{sum.Namespace, row.Policy}
			r := results[k]
			if r == nil {
				r = &ApplicationResult{Cluster: sum.Namespace, Policy: row.Policy, Stale: aggregate.JudgedStale(sum)}
				results[k] = r
			}
			aggregate.Add(&r.Results, row.Results)
			r.Blocked = aggregate.AddCount(r.Blocked, row.Blocked)
		}
	}
	for i := range s.ApplicationPolicies {
		ap := &s.ApplicationPolicies[i]
		if ap.Namespace != namespace || ap.Spec.Application != name {
			continue
		}
		a.ApplicationPolicies = append(a.ApplicationPolicies, ap.Name)
		for _, p := range ap.Status.Policies {
			k := key{p.Cluster, policyhubv1.PolicyRef(ap.Namespace, p.Policy)}
			if r, ok := results[k]; ok {
				// Refusals of creates leave no object to attribute: the generated policy's own count.
				r.Blocked = max(r.Blocked, p.Blocked)
			} else {
				results[k] = &ApplicationResult{Cluster: p.Cluster, Policy: k.policy, Results: p.Results, Blocked: p.Blocked}
			}
			if b := p.LastBlocked; b != nil {
				ref := Refusal{Cluster: p.Cluster, Policy: k.policy, Count: p.Blocked, Message: b.Message}
				if b.Resource != nil {
					ref.Resource = ResourceText(*b.Resource)
				}
				if b.Time != nil {
					ref.At = b.Time.Time
				}
				a.Refusals = append(a.Refusals, ref)
			}
		}
		a.TopViolations = append(a.TopViolations, ap.Status.TopViolations...)
	}
	for _, r := range results {
		r.Violations = aggregate.AddCount(r.Results.Fail, r.Results.Error)
		aggregate.Add(&a.Totals, r.Results)
		a.Blocked = aggregate.AddCount(a.Blocked, r.Blocked)
		a.Results = append(a.Results, *r)
	}
	a.Violations = aggregate.AddCount(a.Totals.Fail, a.Totals.Error)
	slices.SortFunc(a.Results, func(x, y ApplicationResult) int {
		return cmp.Or(strings.Compare(x.Cluster, y.Cluster), strings.Compare(x.Policy, y.Policy))
	})
	slices.Sort(a.ApplicationPolicies)
	slices.SortStableFunc(a.TopViolations, func(x, y policyhubv1.Violation) int {
		return cmp.Compare(policyhubv1.SeverityRank(x.Severity), policyhubv1.SeverityRank(y.Severity))
	})
	for i := range s.Exceptions {
		ex := &s.Exceptions[i]
		if ex.Namespace != namespace || ex.Status.State != policyhubv1.ExceptionActive {
			continue
		}
		a.Exceptions = append(a.Exceptions, exceptionOf(ex))
	}
	return a
}

// ResourceText names a resource for a page: Kind namespace/name.
func ResourceText(r policyhubv1.ResourceRef) string {
	return r.Kind + " " + policyhubv1.PolicyRef(r.Namespace, r.Name)
}
