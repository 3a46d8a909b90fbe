package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// floodCount is how a flooded cluster's count is said (at least what was counted; counting stops
// past the bound).
var floodCount = regexp.MustCompile(`cluster-1 holds [4-9] objects labelled as this hub's \(policyhub.io/managed-by\), more than the 3 its cache may keep`)

// The managed-by label is public: a cluster admin (or anyone who may write Kyverno policies
// there) who puts it on more objects than one cluster's cache may keep does not grow the hub
// without bound, and stops nothing. The flood is seen as it arrives in the cache, which is
// dropped at once and not made again while it lasts; the cluster is still synced and pruned,
// from direct reads (the declarations' messages say so, with the count), an object of the
// flood claiming to be a declaration's is pruned like any of its objects no longer wanted, and
// once the flood is gone the cluster is cached again.
func TestSyncFloodedWithOwnedObjects(t *testing.T) {
	ctx := testContext(t)
	const hubID, limit = "e2e-flood-hub", 3
	s, err := work.NewSyncer(work.Options{HubID: hubID, Lock: lockOptions(hubID + "/test"), MaxOwnedObjects: limit, FloodRecheck: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	cluster := gatewayCluster(t, "cluster-1")
	direct := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	ours := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		labels := obj.GetLabels()
		labels[policyhubv1.LabelManagedBy] = hubID
		obj.SetLabels(labels)
		return obj
	}
	wanted, source := renderFleetPolicy(t, "e2e-flood-wanted", auditTemplate("flood-wanted"), nil)
	decl := work.Declaration{Source: source, Objects: []*unstructured.Unstructured{ours(wanted)}, Prune: true}
	t.Cleanup(func() {
		s.Sync(context.Background(), cluster, []work.Declaration{{Source: source, Prune: true}})
	})
	// Cached: the cache holds the one object.
	onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{decl}), policyhubv1.ClusterPhaseSynced)
	if _, flooded := s.Flooded("cluster-1"); flooded {
		t.Fatal("flooded by one object")
	}

	// The flood: objects labelled as the hub's, one of them claiming to be the declaration's.
	var flood []*unstructured.Unstructured
	for i := range limit + 2 {
		obj := object(t, auditTemplate(fmt.Sprintf("flood-%d", i)))
		obj.SetName(fmt.Sprintf("e2e-flood-%d", i))
		obj.SetLabels(map[string]string{policyhubv1.LabelManagedBy: hubID})
		if i == 0 {
			obj.SetLabels(wanted.GetLabels())
			obj.SetAnnotations(map[string]string{policyhubv1.AnnotationSource: source})
		}
		if err := direct.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		flood = append(flood, obj)
		t.Cleanup(func() { _ = direct.Delete(context.Background(), obj) })
	}
	// Seen by the cache as it arrives, not at the next sync: the cache is dropped.
	eventually(t, 30*time.Second, 100*time.Millisecond, "the cluster found flooded from its cache", func() error {
		if _, flooded := s.Flooded("cluster-1"); !flooded {
			return fmt.Errorf("not flooded; the cache holds %d", s.CachedOwned("cluster-1"))
		}
		return nil
	})

	// Still synced, from direct reads: a change reaches the cluster, the claimant is pruned.
	changed, _ := renderFleetPolicy(t, "e2e-flood-wanted", strings.Replace(auditTemplate("flood-wanted"), "configmaps-need-owner", "configmaps-need-an-owner", 1), nil)
	decl.Objects = []*unstructured.Unstructured{ours(changed)}
	d := onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{decl}), policyhubv1.ClusterPhaseSynced)
	if d.Actions.Updated != 1 || d.Actions.Deleted != 1 {
		t.Errorf("actions %+v, want the object updated and the claimant deleted", d.Actions)
	}
	if !floodCount.MatchString(d.Message) || !strings.Contains(d.Message, "synced from direct reads") {
		t.Errorf("message %q, want the flood's count and how the cluster is synced", d.Message)
	}
	live, err := liveObject(t, "cluster-1", changed)
	if err != nil {
		t.Fatal(err)
	}
	if rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules"); len(rules) != 1 || rules[0].(map[string]any)["name"] != "configmaps-need-an-owner" {
		t.Errorf("the cluster holds rules %v, want the change", rules)
	}
	if err := direct.Get(ctx, client.ObjectKeyFromObject(flood[0]), flood[0].DeepCopy()); !apierrors.IsNotFound(err) {
		t.Errorf("the object claiming to be the declaration's: %v, want it pruned", err)
	}
	if n := s.CachedOwned("cluster-1"); n != 0 {
		t.Errorf("a flooded cluster's cache holds %d objects", n)
	}

	// Once the flood is gone, the cluster is cached again.
	for _, obj := range flood[1:] {
		if err := direct.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, 500*time.Millisecond, "the cluster cached again", func() error {
		d := onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{decl}), policyhubv1.ClusterPhaseSynced)
		if _, flooded := s.Flooded("cluster-1"); flooded || strings.Contains(d.Message, "direct reads") {
			return fmt.Errorf("still flooded: %s", d.Message)
		}
		return nil
	})
	eventually(t, 10*time.Second, 100*time.Millisecond, "the declaration's object cached", func() error {
		if n := s.CachedOwned("cluster-1"); n != 1 {
			return fmt.Errorf("the cache holds %d objects, want the declaration's one", n)
		}
		return nil
	})
	// Pruned as ever.
	onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: source, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	if _, err := liveObject(t, "cluster-1", changed); !apierrors.IsNotFound(err) {
		t.Errorf("after the prune: %v, want it gone", err)
	}
}
