package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A same-named ClusterPolicy that policyhub does not own makes cluster-1 a Conflict: the object
// stays byte for byte as it was (all but the status Kyverno itself writes), policyhub never becomes
// one of its field managers, and cluster-2 is synced all the same.
func TestSyncConflictLeavesForeignPolicyUntouched(t *testing.T) {
	ctx := testContext(t)
	s := newSyncer(t)
	obj, source := renderFleetPolicy(t, "e2e-sync-conflict", auditTemplate("sync-conflict"), nil)

	foreign := obj.DeepCopy()
	foreign.SetLabels(map[string]string{"team": "security"})
	foreign.SetAnnotations(nil)
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	if err := cluster1.Create(ctx, foreign); err != nil {
		t.Fatalf("create the foreign ClusterPolicy: %v", err)
	}
	t.Cleanup(func() { _ = cluster1.Delete(ctx, foreign) })
	before, err := liveObject(t, "cluster-1", obj)
	if err != nil {
		t.Fatal(err)
	}

	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}}
	d := onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), decl), policyhubv1.ClusterPhaseConflict)
	if d.Actions.Conflict != 1 || !strings.Contains(d.Message, "not managed by policyhub") {
		t.Errorf("cluster-1: actions %+v, message %q; want 1 conflict saying the object is not policyhub's", d.Actions, d.Message)
	}
	onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-2"), decl), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() {
		s.Sync(ctx, gatewayCluster(t, "cluster-2"), []work.Declaration{{Source: source, Prune: true}})
	})

	// A later sync with prune must not delete it either.
	onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), []work.Declaration{{Source: source, Prune: true}}), policyhubv1.ClusterPhaseSynced)

	after, err := liveObject(t, "cluster-1", obj)
	if err != nil {
		t.Fatalf("the foreign ClusterPolicy is gone: %v", err)
	}
	for _, mf := range after.GetManagedFields() {
		if mf.Manager == work.FieldManager {
			t.Errorf("policyhub wrote the foreign ClusterPolicy: managedFields %+v", mf)
		}
	}
	b, _ := json.Marshal(withoutKyvernoStatus(before))
	a, _ := json.Marshal(withoutKyvernoStatus(after))
	if string(a) != string(b) {
		t.Errorf("the foreign ClusterPolicy changed:\nbefore %s\nafter  %s", b, a)
	}
}

// withoutKyvernoStatus drops what Kyverno's own status updates change (status, and with it the
// resourceVersion and managedFields).
func withoutKyvernoStatus(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	delete(c.Object, "status")
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	return c.Object
}
