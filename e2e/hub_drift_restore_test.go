package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An owned policy edited or deleted in a cluster is restored within seconds by the cluster's
// worker, which sees the change on its watch: no resync is due (the hub's is an hour away).
func TestHubRestoresDriftWithoutResync(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-hub-drift}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("hub-drift"))
	waitFleetPolicy(t, fp.Name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(clusterPolicyGVK)
	obj.SetName(fp.Name)
	direct := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	message := func(live *unstructured.Unstructured) any {
		rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
		return rules[0].(map[string]any)["validate"].(map[string]any)["message"]
	}
	live, err := liveObject(t, "cluster-1", obj)
	if err != nil {
		t.Fatal(err)
	}
	want := message(live)
	rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
	rules[0].(map[string]any)["validate"].(map[string]any)["message"] = "edited by hand"
	if err := unstructured.SetNestedSlice(live.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	if err := direct.Update(ctx, live); err != nil {
		t.Fatalf("edit the owned policy in the cluster: %v", err)
	}
	edited := time.Now()
	eventually(t, 10*time.Second, 100*time.Millisecond, "the edit restored", func() error {
		live, err := liveObject(t, "cluster-1", obj)
		if err != nil {
			return err
		}
		if got := message(live); got != want {
			return fmt.Errorf("message %q, want %q", got, want)
		}
		return nil
	})
	t.Logf("edit restored in %.1fs", time.Since(edited).Seconds())

	if err := direct.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	eventually(t, 10*time.Second, 100*time.Millisecond, "the deleted policy recreated", func() error {
		_, err := liveObject(t, "cluster-1", obj)
		return err
	})
	t.Logf("delete restored in %.1fs", time.Since(deleted).Seconds())
}
