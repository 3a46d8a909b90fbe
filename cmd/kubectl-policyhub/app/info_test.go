package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
)

// `info` reports the application's page (pages.BuildApplication computes it) as its JSON: lists
// [] when empty, never null; messages on one line; times only when known.
func TestInfoFromPage(t *testing.T) {
	empty, err := json.Marshal(infoFrom(&pages.Application{Namespace: "shop", Name: "nobody"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"applicationPolicies":[]`, `"results":[]`, `"topViolations":[]`, `"blockedAdmissions":[]`, `"violations":0`} {
		if !strings.Contains(string(empty), want) {
			t.Errorf("an unknown application's report %s lacks %s", empty, want)
		}
	}

	seen := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	page := &pages.Application{Namespace: "shop", Name: "shop",
		Results: []pages.ApplicationResult{{Cluster: "cluster-1", Policy: "team", ReportTime: seen}, {Cluster: "cluster-3", Policy: "team"}},
		TopViolations: []policyhubv1.Violation{{Cluster: "cluster-1", Message: "need\n  a team",
			Resource: policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}, Timestamp: &metav1.Time{Time: seen}}},
		Refusals: []pages.Refusal{{Cluster: "cluster-1", Policy: "shop/shop-team", Count: 2, Message: "denied\n  twice", At: seen,
			Resource: &policyhubv1.ResourceRef{Kind: "Pod", Namespace: "shop", Name: "p"}}, {Cluster: "cluster-3", Message: "x"}},
		Exceptions: []pages.Exception{{Namespace: "platform", Name: "named", Policy: "shop/x", ExpiresAt: seen, InForce: 2}},
	}
	r := infoFrom(page)
	if r.Results[0].ReportTime == nil || !r.Results[0].ReportTime.Time.Equal(seen) || r.Results[1].ReportTime != nil {
		t.Errorf("report times %v, %v: want the known one only", r.Results[0].ReportTime, r.Results[1].ReportTime)
	}
	if v := r.TopViolations[0]; v.Message != "need a team" || v.Resource.Name != "web" {
		t.Errorf("violation %+v", v)
	}
	if b := r.BlockedAdmissions[0]; b.Message != "denied twice" || b.Resource == nil || b.Resource.Kind != "Pod" || b.Time == nil || b.Count != 2 {
		t.Errorf("refusal %+v", b)
	}
	if b := r.BlockedAdmissions[1]; b.Resource != nil || b.Time != nil {
		t.Errorf("a refusal without resource or time %+v", b)
	}
	if e := r.Exceptions[0]; e.Namespace != "platform" || e.Policy != "shop/x" || !e.ExpiresAt.Equal(&metav1.Time{Time: seen}) || e.InForce != 2 {
		t.Errorf("exception %+v", e)
	}
}

// seenAt is a summary the hub saw at hub time seen.
func seenAt(seen time.Time, spec policyhubv1.PolicyReportSummarySpec) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{Spec: spec}
	s.Generation, s.Status.ObservedGeneration = 1, 1
	s.Status.ObservedTime = &metav1.MicroTime{Time: seen}
	return s
}
