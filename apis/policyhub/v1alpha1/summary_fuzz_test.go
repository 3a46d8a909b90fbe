package v1alpha1

import (
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fuzzSummary builds a summary from primitive fuzz inputs: copies entries of one policy, one
// application and one exception (duplicates from 2 on), with the counts and strings given.
func fuzzSummary(name, namespace, cluster, policy, policyNamespace, kind, severity string, count, blocked int64, copies uint8) *PolicyReportSummary {
	s := &PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	s.Spec = PolicyReportSummarySpec{
		Cluster: cluster, Totals: ResultCounts{Fail: count, Pass: -count}, Blocked: blocked,
		Engine: EngineInfo{ReportAPIs: []string{kind}},
	}
	for i := range int(copies % 4) {
		s.Spec.Policies = append(s.Spec.Policies, PolicySummary{Name: policy, Namespace: policyNamespace, Kind: kind, Severity: severity,
			Category: severity + severity, Results: ResultCounts{Fail: count + int64(i)}, Blocked: blocked})
		s.Spec.Applications = append(s.Spec.Applications, ApplicationSummary{Namespace: policyNamespace, Name: name, Policy: PolicyRef(policyNamespace, policy),
			Results: ResultCounts{Warn: count}})
		s.Spec.Violations = append(s.Spec.Violations, Violation{Policy: policy, Rule: severity, Result: []string{"fail", "error", severity}[i%3],
			Severity: severity, Resource: ResourceRef{Kind: kind, Namespace: namespace, Name: name}, Message: severity})
		s.Spec.Exceptions = append(s.Spec.Exceptions, ExceptionResults{Name: severity, Results: count - int64(i)})
	}
	if blocked%3 == 0 {
		s.Spec.Truncated = &Truncation{Policies: int32(blocked), Applications: int32(count), Violations: count, Exceptions: int32(blocked)}
	}
	return s
}

// Validate and Accepted never panic, and what they let through holds: the hub aggregates only
// its cluster's own summary, and a valid spec has no negative count, no key twice and no string
// over its bound or invalid.
func FuzzSummaryValidation(f *testing.F) {
	f.Add("summary", "cluster-1", "cluster-1", "require-labels", "", "ClusterPolicy", "high", int64(3), int64(1), uint8(1))
	f.Add("summary", "cluster-1", "cluster-2", "require-labels", "shop", "Policy", "low", int64(0), int64(0), uint8(2))
	f.Add("other", "cluster-1", "cluster-1", "p", "", "", "critical", int64(-1000), int64(-1), uint8(3))
	f.Add("summary", "c", "c", "p\xff", "ns", "Kind", "", int64(1<<62), int64(3), uint8(1))
	f.Fuzz(func(t *testing.T, name, namespace, cluster, policy, policyNamespace, kind, severity string, count, blocked int64, copies uint8) {
		s := fuzzSummary(name, namespace, cluster, policy, policyNamespace, kind, severity, count, blocked, copies)
		if s.Accepted() == nil && (s.Name != SummaryName || s.Spec.Cluster != s.Namespace) {
			t.Fatalf("accepted %s/%s claiming cluster %q", s.Namespace, s.Name, s.Spec.Cluster)
		}
		if s.Spec.Validate() != nil {
			return
		}
		checkSpecInvariants(t, &s.Spec)
	})
}

// checkSpecInvariants fails t unless spec holds what Validate promises, checked field by field.
func checkSpecInvariants(t *testing.T, spec *PolicyReportSummarySpec) {
	t.Helper()
	nonNegative := func(what string, counts ...int64) {
		for _, n := range counts {
			if n < 0 {
				t.Fatalf("valid spec with a negative %s: %d", what, n)
			}
		}
	}
	bounded := func(s string, n int) {
		if len(s) > n || !utf8.ValidString(s) {
			t.Fatalf("valid spec with the string %q (%d bytes, at most %d)", s, len(s), n)
		}
	}
	results := func(r ResultCounts) { nonNegative("result count", r.Pass, r.Fail, r.Warn, r.Error, r.Skip) }
	results(spec.Totals)
	nonNegative("blocked count", spec.Blocked)
	bounded(spec.Cluster, MaxSummaryNameLength)
	if tr := spec.Truncated; tr != nil {
		nonNegative("truncation", int64(tr.Policies), int64(tr.Applications), tr.Violations, int64(tr.Exceptions))
	}
	policies := map[PolicySummaryKey]bool{}
	for _, p := range spec.Policies {
		if policies[p.Key()] {
			t.Fatalf("valid spec lists policy %+v twice", p.Key())
		}
		policies[p.Key()] = true
		results(p.Results)
		nonNegative("blocked count", p.Blocked)
		bounded(p.Name, MaxSummaryNameLength)
		bounded(p.Kind, MaxSummaryKindLength)
		bounded(p.Severity, MaxSummarySeverityLength)
		bounded(p.Category, MaxSummaryCategoryLength)
	}
	apps := map[ApplicationSummaryKey]bool{}
	for _, a := range spec.Applications {
		if apps[a.Key()] {
			t.Fatalf("valid spec lists application %+v twice", a.Key())
		}
		apps[a.Key()] = true
		results(a.Results)
		bounded(a.Policy, MaxSummaryRefLength)
	}
	for _, v := range spec.Violations {
		if v.Result != "fail" && v.Result != "error" {
			t.Fatalf("valid spec with a %q violation", v.Result)
		}
		bounded(v.Severity, MaxSummarySeverityLength)
		bounded(v.Resource.Name, MaxSummaryNameLength)
	}
	exceptions := map[string]bool{}
	for _, e := range spec.Exceptions {
		if exceptions[e.Name] {
			t.Fatalf("valid spec lists exception %q twice", e.Name)
		}
		exceptions[e.Name] = true
		if e.Name == "" {
			t.Fatal("valid spec with an exception without a name")
		}
		bounded(e.Name, MaxSummaryNameLength)
		nonNegative("exception count", e.Results)
	}
	if len(spec.Policies) > MaxSummaryPolicies || len(spec.Applications) > MaxSummaryApplications || len(spec.Violations) > MaxSummaryViolations ||
		len(spec.Exceptions) > MaxSummaryExceptions {
		t.Fatal("valid spec over the lists' bounds")
	}
}
