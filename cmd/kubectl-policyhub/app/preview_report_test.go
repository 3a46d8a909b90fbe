package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func renderPreviewTable(r *previewReport) string {
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printPreview(tw, r, previewNow)
	_ = tw.Flush()
	return out.String()
}

// The table: a header with the totals, one row per cluster of the preview (every one, most newly
// failing first, then by name; "-" counts until a cluster reported), the fleet's first newly
// failing resources.
func TestPreviewTable(t *testing.T) {
	complete := &policyhubv1.PreviewStatus{Shadow: "policyhub-shadow-require-team-v2", StartedAt: previewAgo(12 * time.Minute), CompletedAt: previewAgo(2 * time.Minute),
		Clusters: 4, Reported: 4, Resources: 230, WouldFail: 12, NewlyFailing: 4, Same: 200, Differ: 12, OnlyShadow: 3, OnlyLive: 1,
		FirstNewlyFailing: []policyhubv1.ClusterResource{
			{Cluster: "prod-2", Resource: refOf("shop", "Deployment", "web")},
			{Cluster: "prod-2", Resource: refOf("shop", "Deployment", "api")},
			{Cluster: "prod-1", Resource: refOf("", "Namespace", "legacy")},
		}}
	clusters := []policyhubv1.ClusterStatus{
		{Name: "staging", Preview: &policyhubv1.ClusterPreview{Reported: true, Resources: 30, WouldFail: 2}},
		{Name: "prod-1", Preview: &policyhubv1.ClusterPreview{Reported: true, Resources: 100, WouldFail: 5, NewlyFailing: 1, Differ: 4,
			FirstNewlyFailing: []policyhubv1.ResourceRef{refOf("", "Namespace", "legacy")}}},
		// Not the preview's (no entry): not shown.
		{Name: "aaa-left"},
		{Name: "prod-2", Preview: &policyhubv1.ClusterPreview{Reported: true, Resources: 100, WouldFail: 5, NewlyFailing: 3, Differ: 8,
			FirstNewlyFailing: []policyhubv1.ResourceRef{refOf("shop", "Deployment", "web"), refOf("shop", "Deployment", "api")}}},
		{Name: "edge", Preview: &policyhubv1.ClusterPreview{Reported: true}},
	}
	for _, tc := range []struct {
		name     string
		fp       *policyhubv1.FleetPolicy
		clusters []policyhubv1.ClusterStatus
		want     string
	}{
		{
			name: "complete, with parity", fp: previewFleetPolicy(t, complete.DeepCopy()), clusters: clusters,
			want: `FleetPolicy:     require-team
Candidate:       revision REV, spec.preview.template
Shadow:          policyhub-shadow-require-team-v2
Started:         12m ago
Completed:       2m ago (4 of 4 clusters reported)
Would fail:      12
Newly failing:   4
Resources:       230
Parity:          same 200, differ 12, only shadow 3, only live 1

CLUSTER   REPORTED   RESOURCES   WOULD-FAIL   NEWLY-FAILING   DIFFER   FIRST NEWLY FAILING
prod-2    yes        100         5            3               8        Deployment/shop/web, Deployment/shop/api, +1 more
prod-1    yes        100         5            1               4        Namespace/legacy
edge      yes        0           0            0               0        -
staging   yes        30          2            0               0        -

First newly failing:
CLUSTER   NAMESPACE   KIND         NAME
prod-2    shop        Deployment   web
prod-2    shop        Deployment   api
prod-1    -           Namespace    legacy
(and 1 more not named: the status names the first 20)
`,
		},
		{
			name: "not complete, parity all zero: no parity line",
			fp: previewFleetPolicy(t, &policyhubv1.PreviewStatus{Shadow: "policyhub-shadow-require-team-v2", StartedAt: previewAgo(time.Minute),
				Clusters: 3, Reported: 1, Resources: 30, WouldFail: 2}),
			clusters: []policyhubv1.ClusterStatus{
				{Name: "b", Preview: &policyhubv1.ClusterPreview{}},
				{Name: "staging", Preview: &policyhubv1.ClusterPreview{Reported: true, Resources: 30, WouldFail: 2}},
				{Name: "a", Preview: &policyhubv1.ClusterPreview{}},
			},
			want: `FleetPolicy:     require-team
Candidate:       revision REV, spec.preview.template
Shadow:          policyhub-shadow-require-team-v2
Started:         60s ago
Reported:        1 of 3 clusters reported (not complete: the totals are theirs)
Would fail:      2
Newly failing:   0
Resources:       30

CLUSTER   REPORTED   RESOURCES   WOULD-FAIL   NEWLY-FAILING   DIFFER   FIRST NEWLY FAILING
a         no         -           -            -               -        -
b         no         -           -            -               -        -
staging   yes        30          2            0               0        -
`,
		},
		{
			name: "not started by the hub yet", fp: func() *policyhubv1.FleetPolicy {
				fp := previewFleetPolicy(t, nil)
				fp.Generation = 5
				return fp
			}(),
			want: `FleetPolicy:   require-team
Candidate:     revision REV, spec.preview.template
Started:       not yet: the hub has not started the preview (status.observedGeneration 4, generation 5)
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := strings.ReplaceAll(tc.want, "REV", mustRevision(t, *tc.fp.Spec.Preview.Template))
			if got := renderPreviewTable(buildPreviewReport(tc.fp, tc.clusters)); got != want {
				t.Errorf("table:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// Results of an older candidate are shown as such, and the rollout's preview gate is named.
func TestPreviewTableNotes(t *testing.T) {
	fp := previewFleetPolicy(t, &policyhubv1.PreviewStatus{Shadow: "s", Clusters: 1, Reported: 1, CompletedAt: previewAgo(time.Hour)})
	fp.Status.Preview.Revision = "0123456789"
	fp.Generation = 5
	r := buildPreviewReport(fp, nil)
	if r.UpToDate {
		t.Error("results of another revision taken as up to date")
	}
	if got := renderPreviewTable(r); !strings.Contains(got, "Completed:       60m ago (1 of 1 cluster reported)\n") || !strings.Contains(got, "Note:            these results are of revision 0123456789: the hub has not started the preview of revision "+r.CandidateRevision+" yet (status.observedGeneration 4, generation 5)\n") {
		t.Errorf("no note on results of another revision:\n%s", got)
	}

	max := int64(2)
	gated := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "g", Generation: 1}}
	gated.Spec.Template = *previewCandidateTemplate("")
	gated.Spec.Rollout = &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}}, PreviewGate: &policyhubv1.PreviewGate{MaxWouldFail: ptrTo(int64(10)), MaxNewlyFailing: &max}}
	gated.Status.ObservedGeneration = 1
	gated.Status.Preview = &policyhubv1.PreviewStatus{Revision: mustRevision(t, gated.Spec.Template), Shadow: "policyhub-shadow-g", Clusters: 2}
	r = buildPreviewReport(gated, nil)
	got := renderPreviewTable(r)
	for _, want := range []string{
		"Candidate:       revision " + r.CandidateRevision + ", spec.template (spec.rollout.previewGate: before its waves start)\n",
		"Gate:            would fail at most 10, newly failing at most 2 (spec.rollout.previewGate: the waves wait for it)\n",
		"Reported:        0 of 2 clusters reported",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rollout preview: lacks %q:\n%s", want, got)
		}
	}
	if !r.UpToDate || r.Gate == nil || r.Gate.MaxWouldFail == nil || *r.Gate.MaxWouldFail != 10 {
		t.Errorf("rollout preview report %+v", r)
	}
	// A parity gate alone.
	gated.Spec.Rollout.PreviewGate = &policyhubv1.PreviewGate{Parity: &policyhubv1.ParityGate{MaxDiffering: 3}}
	if got := renderPreviewTable(buildPreviewReport(gated, nil)); !strings.Contains(got, "Gate:            each wave's clusters differ in at most 3 (parity) (spec.rollout.previewGate: the waves wait for it)\n") {
		t.Errorf("parity gate:\n%s", got)
	}
}

// The parity line is shown when any of its counts is non-zero, each alone included.
func TestPreviewParity(t *testing.T) {
	for _, tc := range []struct {
		r    previewReport
		want string
	}{
		{previewReport{}, ""},
		{previewReport{WouldFail: 3, Resources: 9}, ""},
		{previewReport{Same: 5}, "same 5, differ 0, only shadow 0, only live 0"},
		{previewReport{Differ: 2}, "same 0, differ 2, only shadow 0, only live 0"},
		{previewReport{OnlyShadow: 1}, "same 0, differ 0, only shadow 1, only live 0"},
		{previewReport{OnlyLive: 1}, "same 0, differ 0, only shadow 0, only live 1"},
	} {
		if got := tc.r.parity(); got != tc.want {
			t.Errorf("%+v: parity %q, want %q", tc.r, got, tc.want)
		}
	}
}

// Every cluster is shown, not only the status's top 20, and the fleet's named resources are
// followed by how many more there are.
func TestPreviewTableLongLists(t *testing.T) {
	p := &policyhubv1.PreviewStatus{Shadow: "s", CompletedAt: previewAgo(time.Minute), Clusters: 45, Reported: 45, NewlyFailing: 45 * 3}
	var clusters []policyhubv1.ClusterStatus
	for i := range 45 {
		name := fmt.Sprintf("c%02d", i)
		// c44 has the most newly failing; every cluster names 3.
		cp := &policyhubv1.ClusterPreview{Reported: true, Resources: 10, WouldFail: 3, NewlyFailing: 3 + int64(i)/44}
		for j := range 3 {
			cp.FirstNewlyFailing = append(cp.FirstNewlyFailing, refOf("ns", "Pod", fmt.Sprintf("p%d", j)))
		}
		clusters = append(clusters, policyhubv1.ClusterStatus{Name: name, Preview: cp})
		if len(p.FirstNewlyFailing) < policyhubv1.MaxPreviewNamed {
			p.FirstNewlyFailing = append(p.FirstNewlyFailing, policyhubv1.ClusterResource{Cluster: name, Resource: refOf("ns", "Pod", "p")})
		}
	}
	p.NewlyFailing++ // c44's fourth
	r := buildPreviewReport(previewFleetPolicy(t, p), clusters)
	if len(r.PerCluster) != 45 || r.PerCluster[0].Name != "c44" || r.PerCluster[1].Name != "c00" || r.PerCluster[44].Name != "c43" {
		t.Fatalf("per cluster: %d rows, first %s, second %s, last %s", len(r.PerCluster), r.PerCluster[0].Name, r.PerCluster[1].Name, r.PerCluster[44].Name)
	}
	got := renderPreviewTable(r)
	if n := strings.Count(got, "   yes   "); n != 45 {
		t.Errorf("%d cluster rows, want 45:\n%s", n, got)
	}
	if !strings.Contains(got, "c44       yes        10          3            4               0        Pod/ns/p0, Pod/ns/p1, Pod/ns/p2, +1 more\n") {
		t.Errorf("c44's row:\n%s", got)
	}
	if !strings.Contains(got, "(and 116 more not named: the status names the first 20)\n") {
		t.Errorf("no count of the resources not named:\n%s", got)
	}
}

// -o json: every count printed, zeros too; every cluster; the clusters not yet reported with 0.
func TestPreviewReportJSON(t *testing.T) {
	fp := previewFleetPolicy(t, &policyhubv1.PreviewStatus{Shadow: "policyhub-shadow-require-team-v2", Clusters: 2, Reported: 1, WouldFail: 1,
		FirstNewlyFailing: []policyhubv1.ClusterResource{{Cluster: "a", Resource: refOf("shop", "Deployment", "web")}},
		FirstDiffering: []policyhubv1.ClusterDifference{{Cluster: "a", VerdictDifference: policyhubv1.VerdictDifference{
			Resource: refOf("shop", "Deployment", "web"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass}}}})
	r := buildPreviewReport(fp, []policyhubv1.ClusterStatus{
		{Name: "b", Preview: &policyhubv1.ClusterPreview{Reported: false, WouldFail: 7}},
		{Name: "a", Preview: &policyhubv1.ClusterPreview{Reported: true, WouldFail: 1, NewlyFailing: 1, FirstNewlyFailing: []policyhubv1.ResourceRef{refOf("shop", "Deployment", "web")}}},
	})
	var out bytes.Buffer
	if err := writeReport(&out, "json", r, nil); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"fleetPolicy", "candidate", "candidateRevision", "upToDate", "revision", "shadow", "complete", "clusters", "reported",
		"resources", "wouldFail", "newlyFailing", "same", "differ", "onlyShadow", "onlyLive", "perCluster", "firstNewlyFailing", "firstDiffering"} {
		if _, ok := got[key]; !ok {
			t.Errorf("-o json lacks %q:\n%s", key, out.String())
		}
	}
	want := `"perCluster": [
    {
      "name": "a",
      "reported": true,
      "resources": 0,
      "wouldFail": 1,
      "newlyFailing": 1,
      "differ": 0,
      "firstNewlyFailing": [
        {
          "apiVersion": "apps/v1",
          "kind": "Deployment",
          "namespace": "shop",
          "name": "web"
        }
      ]
    },
    {
      "name": "b",
      "reported": false,
      "resources": 0,
      "wouldFail": 0,
      "newlyFailing": 0,
      "differ": 0
    }
  ],
  "firstNewlyFailing": [
    {
      "cluster": "a",
      "apiVersion": "apps/v1",
      "kind": "Deployment",
      "namespace": "shop",
      "name": "web"
    }
  ],
  "firstDiffering": [
    {
      "cluster": "a",
      "apiVersion": "apps/v1",
      "kind": "Deployment",
      "namespace": "shop",
      "name": "web",
      "shadow": "fail",
      "live": "pass"
    }
  ]
}
`
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("-o json:\n%s\nwant it to end with\n%s", out.String(), want)
	}
}
