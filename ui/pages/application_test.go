package pages

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// The application's results come from every cluster's summary (its entries only); its
// ApplicationPolicies (not another application's) add their refusals, top violations (once
// each, most severe first) and the results a summary lacks, named as the summaries name a
// namespaced policy.
func TestBuildApplication(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	// Seen by the hub 10s ago (its cluster's clock an hour behind), and an hour ago.
	summaries := []*policyhubv1.PolicyReportSummary{
		seenAt("cluster-1", now.Add(-10*time.Second), policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-1", GeneratedAt: at(time.Hour),
			Policies: []policyhubv1.PolicySummary{{Name: "shop-team", Namespace: "shop", Kind: "Policy"}},
			Applications: []policyhubv1.ApplicationSummary{
				{Namespace: "shop", Name: "shop", Policy: "team", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
				{Namespace: "shop", Name: "shop", Policy: "shop/shop-team", Results: policyhubv1.ResultCounts{Fail: 1}},
				{Namespace: "shop", Name: "blog", Policy: "team", Results: policyhubv1.ResultCounts{Fail: 7}},
				{Namespace: "other", Name: "shop", Policy: "team", Results: policyhubv1.ResultCounts{Fail: 9}},
			}}),
		// An old summary: stale, though its cluster's clock says it is new.
		seenAt("cluster-2", now.Add(-time.Hour), policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-2", GeneratedAt: at(0),
			Applications: []policyhubv1.ApplicationSummary{{Namespace: "shop", Name: "shop", Policy: "team", Results: policyhubv1.ResultCounts{Error: 1}}}}),
	}
	v := func(cluster, severity, name string, ago time.Duration) policyhubv1.Violation {
		return policyhubv1.Violation{Cluster: cluster, Policy: "shop/shop-team", Rule: "need-team", Result: "fail", Severity: severity,
			Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: name}, Timestamp: at(ago)}
	}
	ap := func(name, app string, status policyhubv1.ApplicationPolicyStatus) *policyhubv1.ApplicationPolicy {
		p := &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Status: status}
		p.Spec.Application = app
		return p
	}
	aps := []*policyhubv1.ApplicationPolicy{
		ap("shop-team", "shop", policyhubv1.ApplicationPolicyStatus{
			Policies: []policyhubv1.ApplicationPolicyResult{
				// In the summary already; its refusals are the application's.
				{Cluster: "cluster-1", Policy: "shop-team", Results: policyhubv1.ResultCounts{Fail: 1}, Blocked: 2,
					LastBlocked: &policyhubv1.BlockedAdmission{Message: "denied\n  twice", Time: at(time.Minute)}},
				// Not in the cluster's summary: from the status.
				{Cluster: "cluster-3", Policy: "shop-team", Blocked: 1},
			},
			TopViolations: []policyhubv1.Violation{v("cluster-1", "medium", "web", time.Minute), v("cluster-1", "high", "api", time.Hour), v("cluster-1", "medium", "db", time.Second)},
		}),
		ap("shop-limits", "shop", policyhubv1.ApplicationPolicyStatus{
			TopViolations: []policyhubv1.Violation{v("cluster-1", "medium", "web", time.Minute)}, // the same one again
		}),
		ap("blog-team", "blog", policyhubv1.ApplicationPolicyStatus{TopViolations: []policyhubv1.Violation{v("cluster-1", "critical", "blog", 0)}}),
	}
	// Stale by the summaries' age, as the CLI judges it without the agents' Leases.
	staleByAge := func(s *policyhubv1.PolicyReportSummary) bool { return aggregate.Stale(s, time.Time{}, now) }
	r := BuildApplication(ApplicationInput{Namespace: "shop", Name: "shop", Summaries: summaries, ApplicationPolicies: aps, Stale: staleByAge, Now: now})

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
	if rt := r.Results[1].ReportTime; !rt.Equal(now.Add(-10 * time.Second)) {
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
		t.Errorf("top violations %v, want the high one first, then the newest (blog's not at all)", order)
	}
	if len(r.Refusals) != 1 || r.Refusals[0].Policy != "shop/shop-team" || r.Refusals[0].Count != 2 || !r.Refusals[0].At.Equal(now.Add(-time.Minute)) {
		t.Errorf("refusals %+v", r.Refusals)
	}

	// Without a judge, the hub's verdict: cluster-2 was never judged stale by the hub.
	judged := BuildApplication(ApplicationInput{Namespace: "shop", Name: "shop", Summaries: summaries, Now: now})
	if judged.Results[2].Stale {
		t.Errorf("%+v stale without the hub's verdict", judged.Results[2])
	}
}

func TestGeneratedPolicyRef(t *testing.T) {
	s := &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{Policies: []policyhubv1.PolicySummary{
		{Name: "p", Namespace: "elsewhere"}, {Name: "p", Namespace: "shop"}, {Name: "q", Namespace: "target"}, {Name: "r"},
	}}}
	for name, want := range map[string]string{"p": "shop/p", "q": "target/q", "r": "shop/r", "missing": "shop/missing"} {
		if got := GeneratedPolicyRef(s, "shop", name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := GeneratedPolicyRef(nil, "shop", "p"); got != "shop/p" {
		t.Errorf("no summary: %q", got)
	}
}

// An application's page lists the active exceptions whose resources are in its namespace: those
// naming it or a pattern matching it, wherever they live, and its own tenant's without
// namespaces; the first to end first, at most MaxApplicationExceptions.
func TestApplicationExceptions(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ex := func(ns, name string, ends time.Duration, namespaces ...string) *policyhubv1.FleetPolicyException {
		e := &policyhubv1.FleetPolicyException{}
		e.Namespace, e.Name = ns, name
		e.Spec.Resources.Namespaces = namespaces
		e.Spec.ExpiresAt = metav1.NewTime(now.Add(ends))
		e.Status.State = policyhubv1.ExceptionActive
		return e
	}
	expired := ex("platform", "expired", time.Hour, "shop")
	expired.Status.State = policyhubv1.ExceptionExpired
	all := []*policyhubv1.FleetPolicyException{
		ex("platform", "named", 3*time.Hour, "shop", "billing"),
		ex("platform", "pattern", time.Hour, "sho?"),
		ex("platform", "elsewhere", time.Hour, "billing"),
		ex("shop", "own", 2*time.Hour),      // a tenant's, without namespaces: its own
		ex("billing", "other", time.Minute), // another tenant's, confined to billing
		expired,
	}
	var got []string
	for _, e := range BuildApplication(ApplicationInput{Namespace: "shop", Name: "shop", Exceptions: all, Now: now}).Exceptions {
		got = append(got, e.Namespace+"/"+e.Name)
	}
	if want := "platform/pattern shop/own platform/named"; strings.Join(got, " ") != want {
		t.Fatalf("exceptions in shop: %v, want %s", got, want)
	}
	for i := range 2 * MaxApplicationExceptions {
		all = append(all, ex("platform", fmt.Sprintf("many-%02d", i), time.Duration(i+1)*time.Minute, "shop"))
	}
	if n := len(BuildApplication(ApplicationInput{Namespace: "shop", Name: "shop", Exceptions: all, Now: now}).Exceptions); n != MaxApplicationExceptions {
		t.Errorf("%d exceptions listed, want at most %d", n, MaxApplicationExceptions)
	}
}

// seenAt is cluster's summary, which the hub saw at hub time seen.
func seenAt(cluster string, seen time.Time, spec policyhubv1.PolicyReportSummarySpec) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{Spec: spec}
	s.Namespace = cluster
	s.Generation, s.Status.ObservedGeneration = 1, 1
	s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
	return s
}
