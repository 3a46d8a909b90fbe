package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// An owned policy edited in the managed cluster is restored by a sync once the syncer's watch of
// the cluster has seen the edit (a sync planned before then finds it unchanged and writes
// nothing: it never writes over a state it did not see); one deleted there is recreated.
func TestSyncCorrectsDrift(t *testing.T) {
	ctx := testContext(t)
	s := newSyncer(t)
	obj, source := renderFleetPolicy(t, "e2e-sync-drift", auditTemplate("sync-drift"), nil)
	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}}
	cluster := gatewayCluster(t, "cluster-1")
	onlyResult(t, s.Sync(ctx, cluster, decl), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() { s.Sync(ctx, cluster, []work.Declaration{{Source: source, Prune: true}}) })

	direct := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	live, err := liveObject(t, "cluster-1", obj)
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
	rules[0].(map[string]any)["validate"].(map[string]any)["message"] = "edited by hand"
	if err := unstructured.SetNestedSlice(live.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	if err := direct.Update(ctx, live); err != nil {
		t.Fatalf("edit the owned policy in the cluster: %v", err)
	}

	eventually(t, 10*time.Second, 100*time.Millisecond, "a sync restores the edit", func() error {
		if d := onlyResult(t, s.Sync(ctx, cluster, decl), policyhubv1.ClusterPhaseSynced); d.Actions.Updated != 1 {
			return fmt.Errorf("after an edit: actions %+v, want updated 1", d.Actions)
		}
		return nil
	})
	restored, err := liveObject(t, "cluster-1", obj)
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ = unstructured.NestedSlice(restored.Object, "spec", "rules")
	if msg := rules[0].(map[string]any)["validate"].(map[string]any)["message"]; msg != "configmaps need an owner label" {
		t.Errorf("the edited message was not restored: %q", msg)
	}

	if err := direct.Delete(ctx, restored); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, 100*time.Millisecond, "a sync recreates the deleted policy", func() error {
		if d := onlyResult(t, s.Sync(ctx, cluster, decl), policyhubv1.ClusterPhaseSynced); d.Actions.Created != 1 {
			return fmt.Errorf("after a delete: actions %+v, want created 1", d.Actions)
		}
		return nil
	})
	if _, err := liveObject(t, "cluster-1", obj); err != nil {
		t.Errorf("the deleted policy was not recreated: %v", err)
	}
}
