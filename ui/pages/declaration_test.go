package pages

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

// previewFleet is a snapshot of one FleetPolicy, name, with its status.preview and its clusters'
// states (one slice).
func previewFleet(fp policyhubv1.FleetPolicy, clusters ...policyhubv1.ClusterStatus) *read.Snapshot {
	return &read.Snapshot{Now: time.Now(), FleetPolicies: []policyhubv1.FleetPolicy{fp},
		Slices: []policyhubv1.ClusterStatusSlice{{Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: fp.Name},
			Clusters: clusters}}}
}

func fleetPolicy(name string) policyhubv1.FleetPolicy {
	fp := policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fp.Spec.Template.Kind = "ClusterPolicy"
	return fp
}

func previewed(name string, p *policyhubv1.ClusterPreview) policyhubv1.ClusterStatus {
	return policyhubv1.ClusterStatus{Name: name, Phase: policyhubv1.ClusterPhaseSynced, Preview: p}
}

func deployment(name string) policyhubv1.ResourceRef {
	return policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: name}
}

// A complete preview of spec.preview.template: where the candidate is, the totals, and one row
// per cluster with a preview entry (a dry-run cluster has none), most newly failing first, then
// would fail, differing and name; a cluster that has not reported counts nothing yet.
func TestDeclarationPreview(t *testing.T) {
	completed := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	fp := fleetPolicy("require-team")
	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: &policyhubv1.PolicyTemplate{Kind: "ValidatingPolicy"}}
	fp.Spec.Preview.Template.Metadata.Name = "require-team-v2"
	fp.Status.Preview = &policyhubv1.PreviewStatus{Revision: "r2", Shadow: "policyhub-shadow-require-team-v2", StartedAt: &completed, CompletedAt: &completed,
		Clusters: 5, Reported: 4, Resources: 40, WouldFail: 21, NewlyFailing: 25, Differ: 1, OnlyShadow: 1,
		FirstNewlyFailing: []policyhubv1.ClusterResource{{Cluster: "b", Resource: deployment("web")}}}
	s := previewFleet(fp,
		previewed("a", &policyhubv1.ClusterPreview{Reported: true, Resources: 10, WouldFail: 5, NewlyFailing: 2, Differ: 1, OnlyShadow: 1, OnlyLive: 3,
			FirstNewlyFailing: []policyhubv1.ResourceRef{deployment("api")}}),
		previewed("b", &policyhubv1.ClusterPreview{Reported: true, Resources: 10, WouldFail: 7, NewlyFailing: 7}),
		// Counts of another revision: not this preview's until the cluster reports.
		previewed("c", &policyhubv1.ClusterPreview{Reported: false, WouldFail: 99, NewlyFailing: 99}),
		policyhubv1.ClusterStatus{Name: "d", Phase: policyhubv1.ClusterPhaseDryRun},
		previewed("e", &policyhubv1.ClusterPreview{Reported: true, Resources: 10, WouldFail: 9, NewlyFailing: 2}),
		previewed("f", &policyhubv1.ClusterPreview{Reported: true, Resources: 10}),
	)
	d := BuildDeclaration(s, policyhubv1.KindFleetPolicy, "", "require-team", 0, 0)
	p := d.Preview
	if p == nil {
		t.Fatal("no preview on the page of a FleetPolicy with status.preview")
	}
	if p.Candidate != CandidatePreviewTemplate || p.CandidatePolicy != "ValidatingPolicy require-team-v2" || p.Gate != nil {
		t.Errorf("candidate %q (%q), gate %v; want spec.preview.template's ValidatingPolicy require-team-v2, no gate", p.Candidate, p.CandidatePolicy, p.Gate)
	}
	if p.Revision != "r2" || p.Shadow != "policyhub-shadow-require-team-v2" || p.CompletedAt == nil || p.WouldFail != 21 || p.Reported != 4 {
		t.Errorf("status %+v, want the FleetPolicy's", p.PreviewStatus)
	}
	if !p.Compared || p.NotNamed != 24 {
		t.Errorf("compared %v, not named %d; want compared (differ and only candidate are not 0), 24 of 25 newly failing not named", p.Compared, p.NotNamed)
	}
	var order []string
	for _, c := range p.PerCluster {
		order = append(order, c.Name)
	}
	if want := []string{"b", "e", "a", "c", "f"}; !slices.Equal(order, want) {
		t.Errorf("preview's clusters %v, want %v", order, want)
	}
	if a := p.PerCluster[2]; a.Differing != 5 || a.WouldFail != 5 || a.Resources != 10 || len(a.FirstNewlyFailing) != 1 ||
		a.FirstNewlyFailing[0].Name != "api" || a.MoreNewlyFailing != 1 {
		t.Errorf("cluster a %+v, want 5 differing (1+1+3), would fail 5, api named and 1 more", a)
	}
	if b := p.PerCluster[0]; b.NewlyFailing != 7 || b.MoreNewlyFailing != 0 {
		t.Errorf("cluster b %+v, want 7 newly failing, none named and so none \"more\"", b)
	}
	if c := p.PerCluster[3]; c.Reported || c.NewlyFailing != 0 || c.WouldFail != 0 {
		t.Errorf("cluster c %+v: not reported, want nothing counted", c)
	}
	if pp := p.PerClusterPages; pp.Total != 5 || pp.From != 1 || pp.To != 5 || pp.Prev != "" || pp.Next != "" {
		t.Errorf("preview's pages %+v, want one of 5", pp)
	}

	// Where else a candidate is: spec.template held back by spec.preview, or a new version of it
	// before a rollout's waves (the gate's bounds beside it); a preview the spec no longer asks
	// for still shows the hub's last results.
	incomplete := fleetPolicy("gated")
	incomplete.Spec.Rollout = &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}},
		PreviewGate: &policyhubv1.PreviewGate{MaxWouldFail: ptr(int64(0)), MaxNewlyFailing: ptr(int64(3)), Parity: &policyhubv1.ParityGate{MaxDiffering: 2}}}
	incomplete.Status.Preview = &policyhubv1.PreviewStatus{Revision: "r1", Shadow: "policyhub-shadow-gated", StartedAt: &completed, Clusters: 2, Reported: 1, WouldFail: 3}
	g := BuildDeclaration(previewFleet(incomplete, previewed("x", &policyhubv1.ClusterPreview{})), policyhubv1.KindFleetPolicy, "", "gated", 0, 0).Preview
	if g == nil || g.Candidate != CandidateRolloutGate || g.CandidatePolicy != "ClusterPolicy gated" || g.CompletedAt != nil || g.Compared {
		t.Fatalf("the rollout's preview %+v", g)
	}
	if want := []string{"would fail at most 0", "newly failing at most 3", "parity: each wave's clusters judged differently in at most 2 resources"}; !slices.Equal(g.Gate, want) {
		t.Errorf("gate %q, want %q", g.Gate, want)
	}
	incomplete.Spec.Preview, incomplete.Spec.Rollout = &policyhubv1.PreviewSpec{}, nil
	if g := BuildDeclaration(previewFleet(incomplete), policyhubv1.KindFleetPolicy, "", "gated", 0, 0).Preview; g.Candidate != CandidateHeldBack || g.Gate != nil || len(g.PerCluster) != 0 {
		t.Errorf("held back: %+v", g)
	}
	incomplete.Spec.Preview = nil
	if g := BuildDeclaration(previewFleet(incomplete), policyhubv1.KindFleetPolicy, "", "gated", 0, 0).Preview; g.Candidate != CandidateGone {
		t.Errorf("a preview no longer asked for: %q", g.Candidate)
	}

	// No status.preview (not started, or ended): no section, whatever the spec or the clusters'
	// entries say.
	none := fleetPolicy("none")
	none.Spec.Preview = &policyhubv1.PreviewSpec{}
	if d := BuildDeclaration(previewFleet(none, previewed("a", &policyhubv1.ClusterPreview{Reported: true, NewlyFailing: 1})), policyhubv1.KindFleetPolicy, "", "none", 0, 0); !d.Found || d.Preview != nil {
		t.Errorf("found %v, preview %+v; want the page without a preview", d.Found, d.Preview)
	}
	// Its clusters' pager keeps no preview's page.
	var many []policyhubv1.ClusterStatus
	for i := range PageSize + 1 {
		many = append(many, policyhubv1.ClusterStatus{Name: fmt.Sprintf("c%03d", i), Phase: policyhubv1.ClusterPhaseSynced})
	}
	if next := BuildDeclaration(previewFleet(none, many...), policyhubv1.KindFleetPolicy, "", "none", 0, 4).ClusterPages.Next; next != "/policies/fleetpolicy/none?page=2" {
		t.Errorf("clusters' next page %q without a preview", next)
	}
}

// A preview's clusters are a page at a time, as the page's clusters are (PageSize rows), on a
// page of their own (PreviewPageParam); each table's pager keeps the other's page.
func TestDeclarationPreviewPages(t *testing.T) {
	fp := fleetPolicy("big")
	fp.Status.Preview = &policyhubv1.PreviewStatus{Revision: "r", Shadow: "policyhub-shadow-big"}
	var clusters []policyhubv1.ClusterStatus
	n := 2*PageSize + 7
	for i := range n {
		clusters = append(clusters, previewed(fmt.Sprintf("c%03d", i), &policyhubv1.ClusterPreview{Reported: true, NewlyFailing: int64(i)}))
	}
	s := previewFleet(fp, clusters...)

	first := BuildDeclaration(s, policyhubv1.KindFleetPolicy, "", "big", 0, 0).Preview
	if len(first.PerCluster) != PageSize || first.PerCluster[0].Name != fmt.Sprintf("c%03d", n-1) || first.PerCluster[PageSize-1].Name != fmt.Sprintf("c%03d", n-PageSize) {
		t.Errorf("first page: %d rows from %s to %s, want %d, the most newly failing first", len(first.PerCluster), first.PerCluster[0].Name, first.PerCluster[len(first.PerCluster)-1].Name, PageSize)
	}
	if pp := first.PerClusterPages; pp.Total != n || pp.Count != 3 || pp.Prev != "" || pp.Next != "/policies/fleetpolicy/big?ppage=2#preview-clusters" {
		t.Errorf("first page %+v", pp)
	}

	d := BuildDeclaration(s, policyhubv1.KindFleetPolicy, "", "big", 1, 2)
	last := d.Preview
	if len(last.PerCluster) != 7 || last.PerCluster[0].Name != "c006" || last.PerCluster[6].Name != "c000" {
		t.Errorf("last page: %d rows, want the 7 least newly failing", len(last.PerCluster))
	}
	if pp := last.PerClusterPages; pp.From != 2*PageSize+1 || pp.To != n || pp.Next != "" ||
		pp.Prev != "/policies/fleetpolicy/big?page=2&ppage=2#preview-clusters" {
		t.Errorf("last page %+v, want its pager to keep the clusters' page 2", pp)
	}
	if cp := d.ClusterPages; cp.Prev != "/policies/fleetpolicy/big?page=1&ppage=3" || cp.Next != "/policies/fleetpolicy/big?page=3&ppage=3" {
		t.Errorf("clusters' pager %q %q, want it to keep the preview's page 3", cp.Prev, cp.Next)
	}
	if len(d.Clusters) != PageSize {
		t.Errorf("clusters' page: %d rows, want %d", len(d.Clusters), PageSize)
	}

	// Past the end: the last page, and the pagers name it.
	past := BuildDeclaration(s, policyhubv1.KindFleetPolicy, "", "big", 0, 99)
	if past.Preview.PerClusterPages.Page != 2 || len(past.Preview.PerCluster) != 7 || !strings.HasSuffix(past.ClusterPages.Next, "&ppage=3") {
		t.Errorf("preview page 100 of 3: %+v, clusters' next %q", past.Preview.PerClusterPages, past.ClusterPages.Next)
	}
}

func ptr[T any](v T) *T { return &v }
