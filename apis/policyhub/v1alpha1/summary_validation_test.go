package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
)

func validSpec() PolicyReportSummarySpec {
	return PolicyReportSummarySpec{
		Cluster: "cluster-1",
		Engine:  EngineInfo{ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2"}},
		Totals:  ResultCounts{Pass: 3, Fail: 1},
		Policies: []PolicySummary{
			{Name: "require-labels", Kind: "ClusterPolicy", Results: ResultCounts{Pass: 3, Fail: 1}},
			{Name: "require-labels", Results: ResultCounts{Pass: 1}}, // kindless: another key
			{Name: "limits", Namespace: "shop", Kind: "Policy"},
		},
		Applications: []ApplicationSummary{
			{Namespace: "shop", Name: "shop", Policy: "require-labels", Results: ResultCounts{Fail: 1}},
			{Namespace: "shop", Name: "shop", Policy: "shop/limits"},
		},
		Violations: []Violation{{Policy: "require-labels", Result: "fail", Resource: ResourceRef{Kind: "Pod", Name: "web"}}},
		Exceptions: []ExceptionResults{{Name: "fpex-shop-web-0123456789", Results: 4}, {Name: "local", Results: 0}},
		Namespaces: []NamespaceSummary{{Namespace: "shop", Results: ResultCounts{Pass: 3, Fail: 1}}, {Namespace: "kube-system", Blocked: 2}},
	}
}

// Validate refuses what the CRD refuses, naming the field.
func TestSummaryValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*PolicyReportSummarySpec)
		want   string // "" means valid
	}{
		{"valid", func(*PolicyReportSummarySpec) {}, ""},
		{"a negative total", func(s *PolicyReportSummarySpec) { s.Totals.Fail = -1000 }, "spec.totals.fail: -1000"},
		{"a negative policy count", func(s *PolicyReportSummarySpec) { s.Policies[0].Results.Skip = -1 }, "spec.policies[0].results.skip"},
		{"negative blocked admissions", func(s *PolicyReportSummarySpec) { s.Applications[1].Blocked = -1 }, "spec.applications[1].blocked"},
		{"a negative truncation", func(s *PolicyReportSummarySpec) { s.Truncated = &Truncation{Violations: -5} }, "spec.truncated.violations"},
		{"a policy listed twice", func(s *PolicyReportSummarySpec) { s.Policies = append(s.Policies, s.Policies[0]) }, "spec.policies[3]: a second entry"},
		{"an application listed twice", func(s *PolicyReportSummarySpec) { s.Applications = append(s.Applications, s.Applications[0]) }, "spec.applications[2]: a second entry"},
		{"an overlong severity", func(s *PolicyReportSummarySpec) { s.Policies[1].Severity = strings.Repeat("x", 65) }, "spec.policies[1].severity: 65 bytes, at most 64"},
		{"an overlong category", func(s *PolicyReportSummarySpec) { s.Policies[1].Category = strings.Repeat("x", 129) }, "spec.policies[1].category"},
		{"an overlong violation resource", func(s *PolicyReportSummarySpec) { s.Violations[0].Resource.Name = strings.Repeat("x", 254) }, "spec.violations[0].resource.name"},
		{"invalid UTF-8", func(s *PolicyReportSummarySpec) { s.Policies[0].Kind = "Cluster\xffPolicy" }, "spec.policies[0].kind: not valid UTF-8"},
		{"a violation that is no fail or error", func(s *PolicyReportSummarySpec) { s.Violations[0].Result = "pass" }, "spec.violations[0].result"},
		{"too many report APIs", func(s *PolicyReportSummarySpec) { s.Engine.ReportAPIs = make([]string, 11) }, "spec.engine.reportAPIs: 11 entries"},
		{"a negative exception count", func(s *PolicyReportSummarySpec) { s.Exceptions[1].Results = -1 }, "spec.exceptions[1].results: -1"},
		{"an exception without a name", func(s *PolicyReportSummarySpec) { s.Exceptions[0].Name = "" }, "spec.exceptions[0].name: empty"},
		{"an overlong exception name", func(s *PolicyReportSummarySpec) { s.Exceptions[0].Name = strings.Repeat("x", 254) }, "spec.exceptions[0].name: 254 bytes, at most 253"},
		{"an exception name of 253 bytes", func(s *PolicyReportSummarySpec) { s.Exceptions[0].Name = strings.Repeat("x", 253) }, ""},
		{"an exception name in invalid UTF-8", func(s *PolicyReportSummarySpec) { s.Exceptions[1].Name = "fpex-\xff" }, "spec.exceptions[1].name: not valid UTF-8"},
		{"an exception listed twice", func(s *PolicyReportSummarySpec) { s.Exceptions = append(s.Exceptions, s.Exceptions[0]) }, "spec.exceptions[2]: a second entry for exception"},
		{"a negative exceptions truncation", func(s *PolicyReportSummarySpec) { s.Truncated = &Truncation{Exceptions: -1} }, "spec.truncated.exceptions"},
		{"exceptions at their bound", func(s *PolicyReportSummarySpec) { s.Exceptions = manyExceptions(MaxSummaryExceptions) }, ""},
		{"too many exceptions", func(s *PolicyReportSummarySpec) { s.Exceptions = manyExceptions(MaxSummaryExceptions + 1) }, "spec.exceptions: 201 entries, at most 200"},
		{"a namespace listed twice", func(s *PolicyReportSummarySpec) { s.Namespaces = append(s.Namespaces, s.Namespaces[0]) }, "spec.namespaces[2]: a second entry for namespace"},
		{"a namespace without a name", func(s *PolicyReportSummarySpec) { s.Namespaces[1].Namespace = "" }, "spec.namespaces[1].namespace: empty"},
		{"an overlong namespace", func(s *PolicyReportSummarySpec) { s.Namespaces[0].Namespace = strings.Repeat("n", 64) }, "spec.namespaces[0].namespace: 64 bytes, at most 63"},
		{"a negative namespace count", func(s *PolicyReportSummarySpec) { s.Namespaces[0].Results.Fail = -3 }, "spec.namespaces[0].results.fail: -3"},
		{"negative dry-runs of a policy", func(s *PolicyReportSummarySpec) { s.Policies[2].BlockedDryRuns = -1 }, "spec.policies[2].blockedDryRuns: -1"},
		{"negative dry-runs of the cluster", func(s *PolicyReportSummarySpec) { s.BlockedDryRuns = -4 }, "spec.blockedDryRuns: -4"},
		{"an overlong reason dry-runs are not counted", func(s *PolicyReportSummarySpec) {
			s.Engine.Kyverno = &KyvernoFacts{DryRunsNotCounted: strings.Repeat("r", MaxDryRunsNotCountedLength+1)}
		}, "spec.engine.kyverno.dryRunsNotCounted: 257 bytes, at most 256"},
		{"negative namespace refusals", func(s *PolicyReportSummarySpec) { s.Namespaces[1].Blocked = -1 }, "spec.namespaces[1].blocked"},
		{"a negative namespaces truncation", func(s *PolicyReportSummarySpec) { s.Truncated = &Truncation{Namespaces: -1} }, "spec.truncated.namespaces"},
		{"too many namespaces", func(s *PolicyReportSummarySpec) {
			s.Namespaces = make([]NamespaceSummary, MaxSummaryNamespaces+1)
			for i := range s.Namespaces {
				s.Namespaces[i].Namespace = fmt.Sprintf("ns-%d", i)
			}
		}, "spec.namespaces: 1001 entries, at most 1000"},
		{"too many policies", func(s *PolicyReportSummarySpec) {
			s.Policies = make([]PolicySummary, MaxSummaryPolicies+1)
			for i := range s.Policies {
				s.Policies[i].Name = strings.Repeat("p", i%200) + string(rune('a'+i/200))
			}
		}, "spec.policies: 1001 entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.change(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// manyExceptions is n exceptions of distinct names.
func manyExceptions(n int) []ExceptionResults {
	out := make([]ExceptionResults, n)
	for i := range out {
		out[i] = ExceptionResults{Name: fmt.Sprintf("fpex-%d", i), Results: int64(i)}
	}
	return out
}
