package controllers

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A preview's status sums the clusters that reported, completes once all have, keeps its
// moments while the candidate is the same (a quiet fleet's preview rewrites nothing), and names
// a bounded number of clusters and resources, those with the most newly failing first.
func TestPreviewStatus(t *testing.T) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Spec: &runtime.RawExtension{Raw: []byte(`{"rules":[]}`)}}
	if previewStatus(fp, nil, nil, nil, time.Now()) != nil {
		t.Fatal("a preview status without spec.preview")
	}
	fp.Spec.Preview = &policyhubv1.PreviewSpec{}
	ref := func(n int) policyhubv1.ResourceRef {
		return policyhubv1.ResourceRef{Kind: "Deployment", Name: fmt.Sprint("d-", n)}
	}
	var clusters []policyhubv1.ClusterStatus
	for i := range 30 {
		clusters = append(clusters, policyhubv1.ClusterStatus{Name: fmt.Sprintf("c-%02d", i), Preview: &policyhubv1.ClusterPreview{
			Reported: true, Resources: 5, WouldFail: 2, NewlyFailing: int64(i % 3), FirstNewlyFailing: []policyhubv1.ResourceRef{ref(i)}}})
	}
	clusters = append(clusters, policyhubv1.ClusterStatus{Name: "dark", Preview: &policyhubv1.ClusterPreview{}}, policyhubv1.ClusterStatus{Name: "dry-run"})
	t1 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

	p := previewStatus(fp, nil, clusters, nil, t1)
	if p.Clusters != 31 || p.Reported != 30 || p.WouldFail != 60 || p.NewlyFailing != 30 || p.Resources != 150 || p.CompletedAt != nil {
		t.Fatalf("preview %+v: want 31 clusters, 30 reported, 60 would-fail, 30 newly failing, not complete", p)
	}
	if p.Shadow != "policyhub-shadow-team" || p.StartedAt == nil || !p.StartedAt.Time.Equal(t1) {
		t.Errorf("shadow %q started %v", p.Shadow, p.StartedAt)
	}
	if len(p.TopClusters) != policyhubv1.MaxPreviewClusters || len(p.FirstNewlyFailing) != policyhubv1.MaxPreviewNamed {
		t.Errorf("%d top clusters, %d named: want the bounds %d, %d", len(p.TopClusters), len(p.FirstNewlyFailing), policyhubv1.MaxPreviewClusters, policyhubv1.MaxPreviewNamed)
	}
	if top := p.TopClusters[0]; top.Cluster != "c-02" || top.NewlyFailing != 2 || top.FirstNewlyFailing != nil {
		t.Errorf("first top cluster %+v, want c-02 (most newly failing, first by name) without names", top)
	}
	if first := p.FirstNewlyFailing[0]; first.Cluster != "c-02" || first.Resource != ref(2) {
		t.Errorf("first named %+v", first)
	}

	clusters[30].Preview.Reported = true
	t2 := t1.Add(time.Minute)
	done := previewStatus(fp, nil, clusters, p, t2)
	if done.CompletedAt == nil || !done.CompletedAt.Time.Equal(t2) || !done.StartedAt.Time.Equal(t1) {
		t.Fatalf("started %v completed %v: want %v and %v", done.StartedAt, done.CompletedAt, t1, t2)
	}
	if later := previewStatus(fp, nil, clusters, done, t2.Add(time.Hour)); !later.CompletedAt.Time.Equal(t2) {
		t.Errorf("the same preview a quiet hour later completed at %v, want %v kept", later.CompletedAt, t2)
	}
	fp.Spec.Preview.Template = &policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Spec: &runtime.RawExtension{Raw: []byte(`{"rules":[{}]}`)}}
	if next := previewStatus(fp, nil, clusters, done, t2.Add(time.Hour)); next.Revision == done.Revision || !next.StartedAt.Time.Equal(t2.Add(time.Hour)) {
		t.Errorf("a new candidate kept the old one's revision or start: %+v", next)
	}
}
