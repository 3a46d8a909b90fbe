package aggregate

import (
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster's blocked count is said to include server-side dry-runs when a policy refusing
// admissions there is of a CEL kind, or its agent could not count them apart (or is older).
func TestBlockedIncludesDryRuns(t *testing.T) {
	yes, no := true, false
	legacy := Policy{Kind: "ClusterPolicy", Name: "team"}
	cel := Policy{Kind: "ValidatingPolicy", Name: "team-cel"}
	tests := []struct {
		name     string
		kyverno  *policyhubv1.KyvernoFacts
		policies []Policy
		blocked  int64
		want     bool
	}{
		{"legacy, counted apart", &policyhubv1.KyvernoFacts{DryRunsCounted: &yes}, []Policy{legacy}, 2, false},
		{"legacy, metrics unread", &policyhubv1.KyvernoFacts{DryRunsCounted: &no, DryRunsNotCounted: "unreachable"}, []Policy{legacy}, 2, true},
		{"legacy, an agent older than the field", &policyhubv1.KyvernoFacts{}, []Policy{legacy}, 2, true},
		{"legacy, no Kyverno facts", nil, []Policy{legacy}, 2, true},
		{"a CEL kind: never counted apart", &policyhubv1.KyvernoFacts{DryRunsCounted: &yes}, []Policy{cel}, 2, true},
		{"nothing refused: nothing included", &policyhubv1.KyvernoFacts{DryRunsCounted: &no}, []Policy{legacy}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{Engine: policyhubv1.EngineInfo{Kyverno: tt.kyverno}}}
			for _, p := range tt.policies {
				s.Spec.Policies = append(s.Spec.Policies, policyhubv1.PolicySummary{Kind: p.Kind, Name: p.Name, Blocked: tt.blocked})
			}
			if got := ForPolicies(s, tt.policies, time.Now()).BlockedIncludesDryRuns; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
