package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestShadowNameIsAShadowsAndAValidPolicyName(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		name, want string
	}{
		{"disallow-latest-tag", "policyhub-shadow-disallow-latest-tag"},
		{strings.Repeat("b", maxShadowBase), ShadowPrefix + strings.Repeat("b", maxShadowBase)},
	} {
		if got := ShadowName(tc.name); got != tc.want {
			t.Errorf("ShadowName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	a, b := ShadowName(long), ShadowName(long[:62]+"b")
	for _, got := range []string{a, b} {
		if !IsShadowName(got) || len(got) > 63 || len(validation.IsDNS1123Subdomain(got)) > 0 {
			t.Errorf("ShadowName of a 63-character name = %q (%d characters): want a shadow's DNS-1123 name of at most 63", got, len(got))
		}
	}
	if a == b {
		t.Errorf("two long names share the shadow %q", a)
	}
	if IsShadowName("disallow-latest-tag") {
		t.Error("a template's name is taken for a shadow's")
	}
}

func TestShadowOfRoundTrips(t *testing.T) {
	for _, tc := range []struct{ kind, namespace, name string }{
		{"ClusterPolicy", "", "disallow-latest-tag"},
		{"NamespacedValidatingPolicy", "shop", "limits"},
	} {
		kind, ns, name, ok := ParseShadowOf(ShadowOfValue(tc.kind, tc.namespace, tc.name))
		if !ok || kind != tc.kind || ns != tc.namespace || name != tc.name {
			t.Errorf("ParseShadowOf(ShadowOfValue(%v)) = %q %q %q %v", tc, kind, ns, name, ok)
		}
	}
	for _, bad := range []string{"", "ClusterPolicy", "/x", "Policy//x", "Policy/ns/", "Policy/a/b/c"} {
		if _, _, _, ok := ParseShadowOf(bad); ok {
			t.Errorf("ParseShadowOf(%q) accepted", bad)
		}
	}
}

func TestSummaryShadowsAreChecked(t *testing.T) {
	good := ShadowResults{Name: ShadowName("p"), Kind: "ClusterPolicy", Resources: 3, WouldFail: 2, NewlyFailing: 1, Same: 2, Differ: 1,
		FirstDiffering: []VerdictDifference{{Resource: ResourceRef{Kind: "Deployment", Name: "web"}, Shadow: VerdictFail, Live: VerdictPass}}}
	for _, tc := range []struct {
		name    string
		mutate  func(*ShadowResults)
		wantErr string
	}{
		{"consistent", func(*ShadowResults) {}, ""},
		{"not a shadow", func(s *ShadowResults) { s.Name = "disallow-latest-tag" }, "is not a shadow's name"},
		{"fails more than it judged", func(s *ShadowResults) { s.WouldFail = 4 }, "counts disagree"},
		{"newly more than failing", func(s *ShadowResults) { s.NewlyFailing = 3 }, "counts disagree"},
		{"negative", func(s *ShadowResults) { s.OnlyLive = -1 }, "cannot be negative"},
		{"unknown verdict", func(s *ShadowResults) { s.FirstDiffering[0].Live = "maybe" }, "must be pass, fail, skip or none"},
		{"too many named", func(s *ShadowResults) { s.FirstNewlyFailing = make([]ResourceRef, MaxShadowNamed+1) }, "at most 10 allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.FirstDiffering = append([]VerdictDifference(nil), good.FirstDiffering...)
			tc.mutate(&s)
			spec := PolicyReportSummarySpec{Shadows: []ShadowResults{s}}
			err := spec.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
	twice := PolicyReportSummarySpec{Shadows: []ShadowResults{good, good}}
	if err := twice.Validate(); err == nil || !strings.Contains(err.Error(), "a second entry") {
		t.Errorf("two entries for one shadow: Validate() = %v", err)
	}
}
