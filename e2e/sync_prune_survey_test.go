package e2e

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// An owned object of a Kyverno kind outside the hub's list of policy kinds (a GlobalContextEntry)
// is still pruned by a hub that did not write it (a restarted one): the first survey of a cluster
// covers every kind the cluster serves in Kyverno's groups, not a fixed list.
func TestSyncPrunesKindsOutsideTheListAfterRestart(t *testing.T) {
	ctx := testContext(t)
	cluster := gatewayCluster(t, "cluster-1")
	entry, source := renderFleetPolicy(t, "e2e-survey-gce", `
apiVersion: kyverno.io/v2beta1
kind: GlobalContextEntry
spec:
  kubernetesResource: {group: apps, version: v1, resource: deployments, namespace: default}
`, nil)
	first := newSyncer(t)
	onlyResult(t, first.Sync(ctx, cluster, []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{entry}, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	if _, err := liveObject(t, "cluster-1", entry); err != nil {
		t.Fatalf("the GlobalContextEntry was not written: %v", err)
	}

	// After a restart the declaration is deleted: the new hub wants nothing of it anywhere.
	restarted := newSyncer(t)
	d := onlyResult(t, restarted.Sync(ctx, cluster, []work.Declaration{{Source: source, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	if d.Actions.Deleted != 1 {
		t.Errorf("actions %+v, want the GlobalContextEntry deleted", d.Actions)
	}
	if _, err := liveObject(t, "cluster-1", entry); !apierrors.IsNotFound(err) {
		t.Errorf("the GlobalContextEntry is orphaned in the cluster (get: %v)", err)
	}
}
