package app

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The application's results come from every cluster's summary (its entries only); its
// ApplicationPolicies add their refusals, top violations (once each, most severe first) and the
// results a summary lacks, named as the summaries name a namespaced policy.
func TestBuildInfo(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	// Seen by the hub 10s ago (its cluster's clock an hour behind), and an hour ago.
	summaries := map[string]*policyhubv1.PolicyReportSummary{
		"cluster-1": seenAt(now.Add(-10*time.Second), policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-1", GeneratedAt: at(time.Hour),
			Policies: []policyhubv1.PolicySummary{{Name: "shop-team", Namespace: "shop", Kind: "Policy"}},
			Applications: []policyhubv1.ApplicationSummary{
				{Namespace: "shop", Name: "shop", Policy: "team", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
				{Namespace: "shop", Name: "shop", Policy: "shop/shop-team", Results: policyhubv1.ResultCounts{Fail: 1}},
				{Namespace: "shop", Name: "blog", Policy: "team", Results: policyhubv1.ResultCounts{Fail: 7}},
				{Namespace: "other", Name: "shop", Policy: "team", Results: policyhubv1.ResultCounts{Fail: 9}},
			}}),
		// An old summary: stale, though its cluster's clock says it is new.
		"cluster-2": seenAt(now.Add(-time.Hour), policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-2", GeneratedAt: at(0),
			Applications: []policyhubv1.ApplicationSummary{{Namespace: "shop", Name: "shop", Policy: "team", Results: policyhubv1.ResultCounts{Error: 1}}}}),
	}
	v := func(cluster, severity, name string, ago time.Duration) policyhubv1.Violation {
		return policyhubv1.Violation{Cluster: cluster, Policy: "shop/shop-team", Rule: "need-team", Result: "fail", Severity: severity,
			Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: name}, Timestamp: at(ago)}
	}
	aps := []*policyhubv1.ApplicationPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-team"}, Status: policyhubv1.ApplicationPolicyStatus{
			Policies: []policyhubv1.ApplicationPolicyResult{
				// In the summary already; its refusals are the application's.
				{Cluster: "cluster-1", Policy: "shop-team", Results: policyhubv1.ResultCounts{Fail: 1}, Blocked: 2,
					LastBlocked: &policyhubv1.BlockedAdmission{Message: "denied\n  twice", Time: at(time.Minute)}},
				// Not in the cluster's summary: from the status.
				{Cluster: "cluster-3", Policy: "shop-team", Blocked: 1},
			},
			TopViolations: []policyhubv1.Violation{v("cluster-1", "medium", "web", time.Minute), v("cluster-1", "high", "api", time.Hour), v("cluster-1", "medium", "db", time.Second)},
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-limits"}, Status: policyhubv1.ApplicationPolicyStatus{
			TopViolations: []policyhubv1.Violation{v("cluster-1", "medium", "web", time.Minute)}, // the same one again
		}},
	}
	r := buildInfo("shop", "shop", summaries, liveness{}, aps, now)

	var results []string
	for _, res := range r.Results {
		results = append(results, fmt.Sprintf("%s %s fail=%d error=%d blocked=%d stale=%v", res.Cluster, res.Policy, res.Results.Fail, res.Results.Error, res.Blocked, res.Stale))
	}
	want := []string{
		"cluster-1 shop/shop-team fail=1 error=0 blocked=2 stale=false",
		"cluster-1 team fail=2 error=0 blocked=0 stale=false",
		"cluster-2 team fail=0 error=1 blocked=0 stale=true",
		"cluster-3 shop/shop-team fail=0 error=0 blocked=1 stale=false",
	}
	if !slices.Equal(results, want) {
		t.Errorf("results\n%q\nwant\n%q", results, want)
	}
	if rt := r.Results[1].ReportTime; rt == nil || !rt.Time.Equal(now.Add(-10*time.Second)) {
		t.Errorf("cluster-1's report time %v, want when the hub saw the summary", rt)
	}
	if r.Totals.Fail != 3 || r.Totals.Error != 1 || r.Totals.Pass != 1 || r.Violations != 4 || r.Blocked != 3 {
		t.Errorf("totals %+v, violations %d, blocked %d", r.Totals, r.Violations, r.Blocked)
	}
	if !slices.Equal(r.ApplicationPolicies, []string{"shop-limits", "shop-team"}) {
		t.Errorf("applicationPolicies %v", r.ApplicationPolicies)
	}
	var order []string
	for _, v := range r.TopViolations {
		order = append(order, v.Resource.Name)
	}
	if !slices.Equal(order, []string{"api", "db", "web"}) {
		t.Errorf("top violations %v, want the high one first, then the newest", order)
	}
	if len(r.BlockedAdmissions) != 1 || r.BlockedAdmissions[0].Message != "denied twice" || r.BlockedAdmissions[0].Policy != "shop/shop-team" || r.BlockedAdmissions[0].Count != 2 {
		t.Errorf("blocked admissions %+v", r.BlockedAdmissions)
	}

	empty := buildInfo("nobody", "shop", summaries, liveness{}, nil, now)
	if empty.Results == nil || empty.TopViolations == nil || empty.BlockedAdmissions == nil || empty.ApplicationPolicies == nil || empty.Violations != 0 {
		t.Errorf("an unknown application: %+v (the lists must be [] in JSON, not null)", empty)
	}
}

func TestGeneratedPolicyRef(t *testing.T) {
	s := &policyhubv1.PolicyReportSummarySpec{Policies: []policyhubv1.PolicySummary{
		{Name: "p", Namespace: "elsewhere"}, {Name: "p", Namespace: "shop"}, {Name: "q", Namespace: "target"}, {Name: "r"},
	}}
	for name, want := range map[string]string{"p": "shop/p", "q": "target/q", "r": "shop/r", "missing": "shop/missing"} {
		if got := generatedPolicyRef(s, "shop", name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := generatedPolicyRef(nil, "shop", "p"); got != "shop/p" {
		t.Errorf("no summary: %q", got)
	}
}

// seenAt is a summary the hub saw at hub time seen.
func seenAt(seen time.Time, spec policyhubv1.PolicyReportSummarySpec) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{Spec: spec}
	s.Generation, s.Status.ObservedGeneration = 1, 1
	s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
	return s
}
