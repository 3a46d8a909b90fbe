package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A declaration synced to both clusters creates its policy in each, labelled as ours; resyncs
// with nothing changed then send only reads: no write persists, not even the Lease, and every
// resourceVersion stays as it was.
func TestSyncCreatesThenNoOpResyncPersistsNothing(t *testing.T) {
	ctx := testContext(t)
	s := newSyncer(t)
	obj, source := renderFleetPolicy(t, "e2e-sync-apply", auditTemplate("sync-apply"), nil)
	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}}

	versions := map[string]string{}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		res := s.Sync(ctx, gatewayCluster(t, cluster), decl)
		d := onlyResult(t, res, policyhubv1.ClusterPhaseSynced)
		if d.Actions.Created != 1 {
			t.Errorf("%s: actions %+v, want created 1", cluster, d.Actions)
		}
		live, err := liveObject(t, cluster, obj)
		if err != nil {
			t.Fatalf("%s: the synced policy is not there: %v", cluster, err)
		}
		if live.GetLabels()[policyhubv1.LabelManagedBy] != e2eHubID || live.GetAnnotations()[policyhubv1.AnnotationSource] != source {
			t.Errorf("%s: ownership marks missing: labels %v", cluster, live.GetLabels())
		}
	}
	// Kyverno writes the policy's status once it has taken it in (its resourceVersion moves):
	// the versions compared are those after it did, so only a write of ours can move them.
	syncCLIKyvernoReady(t, obj.GetName())
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		live, err := liveObject(t, cluster, obj)
		if err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		versions[cluster] = live.GetResourceVersion()
	}
	t.Cleanup(func() {
		for _, cluster := range []string{"cluster-1", "cluster-2"} {
			s.Sync(ctx, gatewayCluster(t, cluster), []work.Declaration{{Source: source, Prune: true}})
		}
	})

	leaseBefore := leaseVersion(t, "cluster-1")
	for range 3 {
		for _, cluster := range []string{"cluster-1", "cluster-2"} {
			res := s.Sync(ctx, gatewayCluster(t, cluster), decl)
			d := onlyResult(t, res, policyhubv1.ClusterPhaseSynced)
			if d.Actions.Unchanged != 1 || d.Actions.Created+d.Actions.Updated+d.Actions.Deleted != 0 {
				t.Errorf("%s resync: actions %+v, want unchanged 1 only", cluster, d.Actions)
			}
			if res.Writes != 0 {
				t.Errorf("%s resync persisted %d writes, want 0", cluster, res.Writes)
			}
		}
	}
	for cluster, before := range versions {
		live, err := liveObject(t, cluster, obj)
		if err != nil {
			t.Fatal(err)
		}
		if live.GetResourceVersion() != before {
			t.Errorf("%s: resourceVersion %s → %s across no-op resyncs", cluster, before, live.GetResourceVersion())
		}
	}
	if after := leaseVersion(t, "cluster-1"); after != leaseBefore {
		t.Errorf("the sync Lease was written by no-op resyncs: resourceVersion %s → %s", leaseBefore, after)
	}
}
