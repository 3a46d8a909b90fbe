package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster admin who adds fields to a policy the hub ships (here an enforcement override that
// turns the Enforce policy into Audit in one namespace, and a label) does not weaken it: server-side
// apply would keep another manager's fields, but the hub owns the whole object, removes what was
// added within seconds, and Kyverno keeps refusing the violating Deployment in that namespace.
func TestHubRemovesFieldsAddedInTheCluster(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour) // no resync: the worker's watch sees the edit
	ctx := testContext(t)
	const ns = "drift-added"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)
	tmpl := latestTagPolicy(t, "e2e-drift-added", ns, "Enforce")
	spec, _ := tmpl.Object["spec"].(map[string]any)
	fp := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-drift-added}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, marshalJSON(spec)))
	waitFleetPolicy(t, fp.Name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	latest := deployment(ns, "web-latest", "nginx:latest")
	eventually(t, 90*time.Second, time.Second, "Kyverno enforces the shipped policy", func() error {
		if err := cluster.Create(ctx, latest.DeepCopy(), client.DryRunAll); err == nil {
			return fmt.Errorf("nginx:latest admitted")
		}
		return nil
	})

	// The namespace admin's edit, as kubectl would make it: a merge patch under its own manager.
	weaken := []byte(fmt.Sprintf(`{"metadata":{"labels":{"weakened":"yes"}},"spec":{"validationFailureActionOverrides":[{"action":"Audit","namespaces":[%q]}]}}`, ns))
	policy := &unstructured.Unstructured{}
	policy.SetGroupVersionKind(clusterPolicyGVK)
	policy.SetName(fp.Name)
	if err := cluster.Patch(ctx, policy, client.RawPatch(types.MergePatchType, weaken), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatalf("the admin's edit: %v", err)
	}
	edited := time.Now()
	eventually(t, 15*time.Second, 100*time.Millisecond, "the added fields removed", func() error {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(clusterPolicyGVK)
		if err := cluster.Get(ctx, client.ObjectKeyFromObject(policy), live); err != nil {
			return err
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "validationFailureActionOverrides"); found {
			return fmt.Errorf("spec.validationFailureActionOverrides is still there")
		}
		if live.GetLabels()["weakened"] != "" {
			return fmt.Errorf("the added label is still there")
		}
		if live.GetLabels()[policyhubv1.LabelManagedBy] == "" {
			return fmt.Errorf("the restore lost the hub's own label")
		}
		return nil
	})
	t.Logf("added fields removed in %.1fs", time.Since(edited).Seconds())

	// The unsafe effect never lasts: Kyverno refuses the violating Deployment in that namespace.
	eventually(t, 60*time.Second, time.Second, "Kyverno still enforces in "+ns, func() error {
		if err := cluster.Create(ctx, latest.DeepCopy(), client.DryRunAll); err == nil {
			return fmt.Errorf("nginx:latest admitted in %s", ns)
		}
		return nil
	})
	waitFleetPolicy(t, fp.Name, "synced again", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
}
