package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The agent inventories its cluster's Kyverno legacy objects, owned or not: a kyverno.io/v1
// ClusterPolicy the hub ships for a FleetPolicy counts and is named as policyhub's; a
// ClusterPolicy, a Policy and a kyverno.io/v2 PolicyException created directly in the cluster
// count and are named as someone else's. The counts are the cluster's, kind by kind; once the
// objects are removed (the FleetPolicy deleted, its ClusterPolicy pruned) they are gone from it.
func TestAgentReportsLegacyInventory(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const cluster, ns = "cluster-1", "legacy-inventory"
	c1 := directClient(t, fleetOf(t).Cluster(cluster).Config)
	createNamespace(ctx, t, c1, ns)
	startAgent(t, cluster)

	const owned = "legacy-inventory-ours"
	fp := createFleetPolicy(t, teamLabelPolicy(owned, ns, "Audit", cluster))
	waitFleetPolicy(t, owned, "synced in "+cluster, wantPhases(map[string]policyhubv1.ClusterPhase{cluster: "Synced"}))

	theirs := []*unstructured.Unstructured{
		object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: legacy-inventory-theirs}
spec:
  rules:
  - name: need-team
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [%s]}}]}
    validate: {failureAction: Audit, message: "a team label", pattern: {metadata: {labels: {team: "?*"}}}}
`, ns)),
		object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: legacy-inventory-theirs, namespace: %s}
spec:
  rules:
  - name: need-team
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {failureAction: Audit, message: "a team label", pattern: {metadata: {labels: {team: "?*"}}}}
`, ns)),
		object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: legacy-inventory-theirs, namespace: %s}
spec:
  exceptions: [{policyName: legacy-inventory-theirs, ruleNames: [need-team]}]
  match: {any: [{resources: {kinds: [ConfigMap], namespaces: [%s], names: [only-this-one]}}]}
`, policyhubv1.DefaultExceptionNamespace, ns)),
	}
	for _, obj := range theirs {
		if err := c1.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = c1.Delete(context.Background(), obj) })
	}
	wantNamed := []policyhubv1.LegacyObject{
		{Kind: "ClusterPolicy", Name: owned, Owner: policyhubv1.LegacyOwnerPolicyhub},
		{Kind: "ClusterPolicy", Name: "legacy-inventory-theirs", Owner: policyhubv1.LegacyOwnerOther},
		{Kind: "Policy", Namespace: ns, Name: "legacy-inventory-theirs", Owner: policyhubv1.LegacyOwnerOther},
		{Kind: "PolicyException", Namespace: policyhubv1.DefaultExceptionNamespace, Name: "legacy-inventory-theirs", Owner: policyhubv1.LegacyOwnerOther},
	}
	eventually(t, 60*time.Second, 500*time.Millisecond, "the inventory counts and names the legacy objects by owner", func() error {
		inv, err := inventoryMatchesCluster(ctx, t, cluster)
		if err != nil {
			return err
		}
		for _, o := range wantNamed {
			if !slices.Contains(inv.Objects, o) {
				return fmt.Errorf("%+v not named in %+v", o, inv.Objects)
			}
		}
		return nil
	})

	// Remove them: what the hub ships by deleting its FleetPolicy (pruned in the cluster), the
	// others directly.
	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	for _, obj := range theirs {
		if err := c1.Delete(ctx, obj); err != nil {
			t.Fatalf("delete %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	eventually(t, 60*time.Second, 500*time.Millisecond, "the inventory without them", func() error {
		inv, err := inventoryMatchesCluster(ctx, t, cluster)
		if err != nil {
			return err
		}
		for _, o := range inv.Objects {
			if slices.ContainsFunc(wantNamed, func(w policyhubv1.LegacyObject) bool {
				return w.Kind == o.Kind && w.Namespace == o.Namespace && w.Name == o.Name
			}) {
				return fmt.Errorf("%+v still named", o)
			}
		}
		return nil
	})
}

// legacyResources are the legacy kinds' resources at the versions the fleet's Kyverno serves.
var legacyResources = map[string]schema.GroupVersionKind{
	"ClusterPolicy":        {Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicyList"},
	"Policy":               {Group: "kyverno.io", Version: "v1", Kind: "PolicyList"},
	"ClusterCleanupPolicy": {Group: "kyverno.io", Version: "v2", Kind: "ClusterCleanupPolicyList"},
	"CleanupPolicy":        {Group: "kyverno.io", Version: "v2", Kind: "CleanupPolicyList"},
	"PolicyException":      {Group: "kyverno.io", Version: "v2", Kind: "PolicyExceptionList"},
}

// inventoryMatchesCluster reads the cluster's summary's legacy inventory and fails unless its
// counts are the cluster's own, by kind and owner, as listed from the cluster directly now.
func inventoryMatchesCluster(ctx context.Context, t *testing.T, cluster string) (*policyhubv1.LegacyInventory, error) {
	t.Helper()
	e, err := engineOf(t, cluster)
	if err != nil {
		return nil, err
	}
	if e.Legacy == nil {
		return nil, fmt.Errorf("no legacy inventory in the summary")
	}
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	want := map[string]int64{}
	for kind, gvk := range legacyResources {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list, client.InNamespace("")); err != nil {
			return nil, fmt.Errorf("list %s: %w", kind, err)
		}
		for _, o := range list.Items {
			owner := policyhubv1.LegacyOwnerOther
			if _, ok := o.GetLabels()[policyhubv1.LabelManagedBy]; ok {
				owner = policyhubv1.LegacyOwnerPolicyhub
			}
			want[kind+"/"+string(owner)]++
		}
	}
	got := map[string]int64{}
	for _, c := range e.Legacy.Counts {
		got[c.Kind+"/"+string(c.Owner)] = c.Count
	}
	if !maps.Equal(got, want) {
		return nil, fmt.Errorf("counts %v, the cluster holds %v", got, want)
	}
	return e.Legacy, nil
}
