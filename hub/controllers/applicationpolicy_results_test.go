package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/engine"
)

func TestApplicationResults(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	summaries := map[string]*policyhubv1.PolicyReportSummary{
		"c1": &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{
			Cluster: "c1",
			Policies: []policyhubv1.PolicySummary{
				{Name: "shop-limits", Namespace: "shop", Kind: "Policy", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}, Blocked: 2,
					LastBlocked: &policyhubv1.BlockedAdmission{Message: "Deployment shop/web: [need-team] fail (blocked); team label"}},
			},
			Applications: []policyhubv1.ApplicationSummary{
				{Namespace: "shop", Name: "shop", Policy: "shop/shop-limits", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
				// Listed twice (an older CRD let it through): counted once.
				{Namespace: "shop", Name: "shop", Policy: "shop/shop-limits", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}},
				// Another application's results of a policy of the same name elsewhere: not ours.
				{Namespace: "shop", Name: "blog", Policy: "shop/shop-limits", Results: policyhubv1.ResultCounts{Fail: 9}},
				{Namespace: "shop", Name: "shop", Policy: "other", Results: policyhubv1.ResultCounts{Fail: 5}},
			},
			Violations: []policyhubv1.Violation{
				{Policy: "shop/shop-limits", Rule: "need-team", Result: "fail", Severity: "low", Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "api"}},
				{Policy: "other", Result: "fail", Severity: "critical"},
				{Policy: "shop/shop-limits", Rule: "need-team", Result: "fail", Severity: "high", Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}},
			},
		}},
	}
	owned := map[string][]aggregate.Policy{"c1": {{Kind: "Policy", Namespace: "shop", Name: "shop-limits"}}, "c2": {{Kind: "Policy", Namespace: "shop", Name: "shop-limits"}}}
	// c3 is another replica's: its state counts as its owner wrote it, its summary is not read.
	summaries["c3"] = &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{Cluster: "c3", Violations: []policyhubv1.Violation{{Policy: "shop/shop-limits", Result: "fail", Severity: "critical"}}}}
	owned["c3"] = owned["c1"]
	theirs := policyhubv1.Violation{Cluster: "c3", Policy: "shop/shop-limits", Result: "error", Severity: "medium", Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "db"}}
	clusters := []policyhubv1.ClusterStatus{{Name: "c1"}, {Name: "c2", Violations: []policyhubv1.Violation{theirs}}, {Name: "c3",
		ApplicationResults: []policyhubv1.ApplicationPolicyResult{{Cluster: "c3", Policy: "shop-limits", Results: policyhubv1.ResultCounts{Error: 1}}},
		Violations:         []policyhubv1.Violation{theirs}}}
	results, top := applicationResults("shop", clusters, engine.SummaryRead{Summaries: summaries, Unread: map[string]bool{"c3": true}}, owned, now)
	if len(results) != 2 || results[0].Cluster != "c1" || results[0].Results != (policyhubv1.ResultCounts{Pass: 1, Fail: 2}) || results[0].Blocked != 2 ||
		results[0].LastBlocked == nil || results[0].LastBlocked.Message == "" || results[1].Cluster != "c3" || results[1].Results.Error != 1 {
		t.Errorf("results %+v", results)
	}
	if len(top) != 3 || top[0].Resource.Name != "web" || top[1].Resource.Name != "db" || top[2].Resource.Name != "api" || top[0].Cluster != "c1" || top[1].Cluster != "c3" {
		t.Errorf("top violations (only the application's policies, most severe first; c3's as its owner wrote them): %+v", top)
	}
	if len(clusters[0].ApplicationResults) != 1 || len(clusters[0].Violations) != 2 || clusters[1].Violations != nil {
		t.Errorf("each cluster this replica works keeps its own part for the status's writer: %+v", clusters[:2])
	}
	if r := clusters[0].Results; r == nil || r.Fail != 2 || clusters[0].Blocked != 2 {
		t.Errorf("c1 status %+v", clusters[0])
	}
	if clusters[1].Results != nil {
		t.Errorf("c2 has no summary, so no results: %+v", clusters[1])
	}
}

// One cluster cannot push the others out of an ApplicationPolicy's top violations: fifty
// critical violations dated in the future from one cluster leave the other cluster's one low
// violation in the list, and a time later than now ranks as now.
func TestTopViolationsAreFairAcrossClusters(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	owned := map[string][]aggregate.Policy{}
	summaries := map[string]*policyhubv1.PolicyReportSummary{}
	var hostile []policyhubv1.Violation
	for i := range 50 {
		hostile = append(hostile, policyhubv1.Violation{Policy: "shop/limits", Result: "fail", Severity: "critical",
			Resource:  policyhubv1.ResourceRef{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("fake-%02d", i)},
			Timestamp: &metav1.Time{Time: now.Add(time.Duration(i+1) * time.Hour)}})
	}
	normal := []policyhubv1.Violation{{Policy: "shop/limits", Result: "fail", Severity: "low",
		Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}, Timestamp: &metav1.Time{Time: now.Add(-time.Hour)}}}
	for name, violations := range map[string][]policyhubv1.Violation{"a-hostile": hostile, "b-normal": normal} {
		owned[name] = []aggregate.Policy{{Kind: "Policy", Namespace: "shop", Name: "limits"}}
		summaries[name] = &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{Cluster: name, Violations: violations}}
	}
	clusters := []policyhubv1.ClusterStatus{{Name: "a-hostile"}, {Name: "b-normal"}}
	_, top := applicationResults("shop", clusters, engine.SummaryRead{Summaries: summaries}, owned, now)
	if len(top) != maxTopViolations {
		t.Fatalf("%d top violations, want %d", len(top), maxTopViolations)
	}
	if last := top[len(top)-1]; last.Cluster != "b-normal" || last.Resource.Name != "web" {
		t.Errorf("the normal cluster's violation was pushed out (or not ranked last, least severe): last is %+v", last)
	}
	// The hostile cluster's future times rank as now: its own order is kept by turn (fake-00 first).
	if top[0].Resource.Name != "fake-00" || top[1].Resource.Name != "fake-01" {
		t.Errorf("first %s, %s; want fake-00, fake-01 (equal times now, in the cluster's own order)", top[0].Resource.Name, top[1].Resource.Name)
	}
}

func TestTopViolations(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	v := func(cluster, name, severity string, age time.Duration) policyhubv1.Violation {
		return policyhubv1.Violation{Cluster: cluster, Severity: severity, Resource: policyhubv1.ResourceRef{Name: name}, Timestamp: &metav1.Time{Time: now.Add(-age)}}
	}
	names := func(vs []policyhubv1.Violation) string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Cluster+"/"+v.Resource.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name      string
		byCluster [][]policyhubv1.Violation
		n         int
		want      string
	}{
		{"nothing", nil, 3, ""},
		{"one cluster: most severe, then newest", [][]policyhubv1.Violation{{v("a", "old", "high", 2*time.Hour), v("a", "low", "low", 0), v("a", "new", "high", time.Hour)}}, 3, "a/new,a/old,a/low"},
		{
			"turns: each cluster's best first, then ranked",
			[][]policyhubv1.Violation{
				{v("a", "a1", "critical", 0), v("a", "a2", "critical", 0), v("a", "a3", "critical", 0)},
				{v("b", "b1", "medium", 0), v("b", "b2", "medium", 0)},
				{v("c", "c1", "", 0)},
			},
			4, "a/a1,a/a2,b/b1,c/c1",
		},
		{"a future time ranks as now", [][]policyhubv1.Violation{{v("a", "future", "high", -time.Hour), v("a", "now", "high", 0)}}, 2, "a/future,a/now"},
		{"no time ranks last among equals", [][]policyhubv1.Violation{{{Cluster: "a", Severity: "high"}, v("a", "dated", "high", time.Hour)}}, 2, "a/dated,a/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(topViolations(tc.byCluster, tc.n, now)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// A status whose pass, warn or skip counts alone moved is not written (they move with every
// agent's summary); a moved fail count, or anything else, is.
func TestStatusChurnIsNotAChange(t *testing.T) {
	fp := func(pass, fail int64) engine.Declaration {
		d := &fleetPolicy{FleetPolicy: &policyhubv1.FleetPolicy{}}
		d.Status.Summary = policyhubv1.StatusSummary{Clusters: 2, Results: policyhubv1.ResultCounts{Pass: pass, Skip: pass, Warn: pass, Fail: fail}}
		return d
	}
	ap := func(pass, fail int64) engine.Declaration {
		d := &applicationPolicy{ApplicationPolicy: &policyhubv1.ApplicationPolicy{}}
		d.Status.Policies = []policyhubv1.ApplicationPolicyResult{{Cluster: "c1", Policy: "p", Results: policyhubv1.ResultCounts{Pass: pass, Fail: fail}}}
		return d
	}
	for _, kind := range []struct {
		name string
		make func(pass, fail int64) engine.Declaration
	}{{"FleetPolicy", fp}, {"ApplicationPolicy", ap}} {
		same := !engine.StatusChanged(kind.make(1, 3), kind.make(9, 3))
		moved := !engine.StatusChanged(kind.make(1, 3), kind.make(1, 4))
		if !same || moved {
			t.Errorf("%s: pass moved counts as a change: %v; fail moved counts as none: %v", kind.name, !same, moved)
		}
	}
}
