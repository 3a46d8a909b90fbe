package collect

import (
	"strings"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestPolicyItemKeepsShadowAnnotationsOfShadowsOnly(t *testing.T) {
	shadowName := policyhubv1.ShadowName("require-team")
	annotations := map[string]string{
		policyhubv1.AnnotationShadowOf:                     "ClusterPolicy/require-team",
		policyhubv1.AnnotationContentHash:                  "sha256:0123",
		annotationTitle:                                    "Require a team",
		"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096),
	}
	longOf := "ClusterPolicy/" + strings.Repeat("n", 500)
	longHash := "sha256:" + strings.Repeat("f", 200)
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		wantShadow  bool
		want        ShadowInfo
	}{
		{"a labelled shadow keeps its shadow-of and content hash", map[string]string{policyhubv1.LabelShadow: "true", "team": "x"}, annotations,
			true, ShadowInfo{Of: "ClusterPolicy/require-team", ContentHash: "sha256:0123"}},
		{"a labelled shadow without annotations is a shadow with no live counterpart", map[string]string{policyhubv1.LabelShadow: "true"}, nil,
			true, ShadowInfo{}},
		{"without the label, the annotations are dropped", map[string]string{"team": "x"}, annotations, false, ShadowInfo{}},
		{"a label other than true is no shadow's", map[string]string{policyhubv1.LabelShadow: "false"}, annotations, false, ShadowInfo{}},
		{"long values are cut to their bounds with a mark", map[string]string{policyhubv1.LabelShadow: "true"},
			map[string]string{policyhubv1.AnnotationShadowOf: longOf, policyhubv1.AnnotationContentHash: longHash},
			true, ShadowInfo{Of: Cut(longOf, MaxShadowOf), ContentHash: Cut(longHash, MaxShadowContentHash)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: shadowName, UID: "u1", ResourceVersion: "7", Labels: tt.labels, Annotations: tt.annotations,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "policyhub"}},
			}}
			it := policyItem("ValidatingPolicy", m)
			if *it.policy != (PolicyKey{Kind: "ValidatingPolicy", Name: shadowName}) {
				t.Errorf("key %+v", *it.policy)
			}
			if it.UID != "u1" || it.ResourceVersion != "7" || it.ManagedFields != nil {
				t.Errorf("identity %+v: want UID and resourceVersion only", it.ObjectMeta)
			}
			if it.info.Title != tt.annotations[annotationTitle] {
				t.Errorf("title %q", it.info.Title)
			}
			got, ok := it.shadow()
			if ok != tt.wantShadow || got != tt.want {
				t.Errorf("shadow() = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantShadow)
			}
			if !tt.wantShadow && (it.Labels != nil || it.Annotations != nil) {
				t.Errorf("an ordinary policy keeps labels %v and annotations %v: want none", it.Labels, it.Annotations)
			}
			if tt.wantShadow && (len(it.Labels) != 1 || len(it.Annotations) != 2) {
				t.Errorf("a shadow keeps labels %v and annotations %v: want its label and the two annotations only", it.Labels, it.Annotations)
			}
			if len(got.Of) > MaxShadowOf || len(got.ContentHash) > MaxShadowContentHash {
				t.Errorf("kept %d and %d bytes, bounds %d and %d", len(got.Of), len(got.ContentHash), MaxShadowOf, MaxShadowContentHash)
			}
			if tt.name == "long values are cut to their bounds with a mark" {
				if !strings.HasSuffix(got.Of, "…") || !strings.HasSuffix(got.ContentHash, "…") {
					t.Errorf("cut values %q, %q carry no mark", got.Of, got.ContentHash)
				}
			}
		})
	}
	// What an entry of spec.shadows may carry: the bound the agent cuts to is Validate's.
	spec := policyhubv1.PolicyReportSummarySpec{Shadows: []policyhubv1.ShadowResults{{
		Name: shadowName, Of: Cut(longOf, MaxShadowOf), ContentHash: Cut(longHash, MaxShadowContentHash),
	}}}
	if err := spec.Validate(); err != nil {
		t.Errorf("a shadow entry with the longest values kept: %v", err)
	}
}

// A report about one Deployment with results of a live policy and of its shadow: the shadow's
// results are counted (the summary compares them per resource), but its violations and the
// exceptions it honoured are not kept.
const shadowReport = `
apiVersion: wgpolicyk8s.io/v1alpha2
kind: PolicyReport
metadata: {name: 8d3e, namespace: shop}
scope: {apiVersion: apps/v1, kind: Deployment, namespace: shop, name: web, uid: 8d3e}
results:
- {policy: require-team, rule: need-team, result: pass, source: kyverno}
- {policy: policyhub-shadow-require-team, rule: need-team-and-tier, result: fail, source: KyvernoValidatingPolicy, message: "tier is required"}
- {policy: policyhub-shadow-require-team, rule: other, result: error, source: KyvernoValidatingPolicy, message: boom}
- {policy: policyhub-shadow-require-team, rule: exempt, result: skip, source: KyvernoValidatingPolicy, properties: {exceptions: shadow-exception}}
- {policy: disallow-latest, rule: check, result: fail, source: kyverno, message: "latest tag"}
`

func TestDigestReportKeepsShadowResultsApart(t *testing.T) {
	digests := DigestReport(typedReport(t, ReportKinds[0], shadowReport, &openreportsv1alpha1.Report{}))
	if len(digests) != 1 {
		t.Fatalf("%d digests, want 1", len(digests))
	}
	d := digests[0]
	want := map[PolicyKey]Counts{
		{Kind: "ClusterPolicy", Name: "require-team"}:                     {Pass: 1},
		{Kind: "ValidatingPolicy", Name: "policyhub-shadow-require-team"}: {Fail: 1, Error: 1, Skip: 1},
		{Kind: "ClusterPolicy", Name: "disallow-latest"}:                  {Fail: 1},
	}
	if len(d.Policies) != len(want) {
		t.Fatalf("%d policies, want %d", len(d.Policies), len(want))
	}
	for i := range d.Policies {
		pc := &d.Policies[i]
		if w, ok := want[pc.Policy()]; !ok || pc.Counts != w {
			t.Errorf("%+v: counts %+v, want %+v (known %v)", pc.Policy(), pc.Counts, w, ok)
		}
	}
	if len(d.Violations) != 1 || d.Violations[0].Policy.Name != "disallow-latest" {
		t.Errorf("violations %+v: want disallow-latest's only", d.Violations)
	}
	if d.Exceptions != nil {
		t.Errorf("exceptions %+v: a shadow's exempted results count for no exception", d.Exceptions)
	}
}
