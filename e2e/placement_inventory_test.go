package e2e

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/placement"
)

// The hub's inventory is cluster-gateway's credential Secrets (their labels, less the credential
// type) merged with OCM ManagedCluster labels, plus OCM PlacementDecisions; a label change on a
// Secret shows at the next read.
func TestInventoryReadsGatewaySecretsAndOCM(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)

	inv, err := placement.ReadInventory(ctx, hub, fleetOf(t).SecretNamespace)
	if err != nil {
		t.Fatal(err)
	}
	want := []placement.Cluster{
		{Name: "cluster-1", Labels: map[string]string{"env": "staging"}},
		{Name: "cluster-2", Labels: map[string]string{"env": "prod"}},
		{Name: "cluster-3", Labels: map[string]string{"kyverno": "v1.16"}},
		{Name: gatekeeperCluster, Labels: map[string]string{"engine": "gatekeeper"}},
		{Name: kubernetesCluster, Labels: map[string]string{"engine": "kubernetes"}},
	}
	if !reflect.DeepEqual(inv.Clusters, want) {
		t.Fatalf("inventory %v, want %v", inv.Clusters, want)
	}

	// OCM: a ManagedCluster adds labels to cluster-2 (the Secret's win on a clash) and a cluster
	// only OCM knows; a PlacementDecision names cluster-1.
	managed := func(name string, labels map[string]string) *unstructured.Unstructured {
		mc := object(t, `{"apiVersion":"cluster.open-cluster-management.io/v1","kind":"ManagedCluster","spec":{"hubAcceptsClient":true}}`)
		mc.SetName(name)
		mc.SetLabels(labels)
		return mc
	}
	mc2 := managed("cluster-2", map[string]string{"region": "eu", "env": "ignored-secret-wins"})
	mcOCM := managed("ocm-only", map[string]string{"region": "us"})
	for _, mc := range []*unstructured.Unstructured{mc2, mcOCM} {
		if err := hub.Create(ctx, mc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hub.Delete(context.Background(), mc) })
	}
	createPlacementDecision(ctx, t, "ocm-e2e", "prod-placement", "cluster-1")

	if err := fleetOf(t).SetClusterLabels(ctx, "cluster-1", map[string]string{"env": "staging", "tier": "gold"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fleetOf(t).SetClusterLabels(context.Background(), "cluster-1", map[string]string{"env": "staging"})
	})

	inv, err = placement.ReadInventory(ctx, hub, fleetOf(t).SecretNamespace)
	if err != nil {
		t.Fatal(err)
	}
	want = []placement.Cluster{
		{Name: "cluster-1", Labels: map[string]string{"env": "staging", "tier": "gold"}},
		{Name: "cluster-2", Labels: map[string]string{"env": "prod", "region": "eu"}},
		{Name: "cluster-3", Labels: map[string]string{"kyverno": "v1.16"}},
		{Name: gatekeeperCluster, Labels: map[string]string{"engine": "gatekeeper"}},
		{Name: kubernetesCluster, Labels: map[string]string{"engine": "kubernetes"}},
		{Name: "ocm-only", Labels: map[string]string{"region": "us"}},
	}
	if !reflect.DeepEqual(inv.Clusters, want) {
		t.Errorf("inventory with OCM %v, want %v", inv.Clusters, want)
	}
	ref := types.NamespacedName{Namespace: "ocm-e2e", Name: "prod-placement"}
	if got := inv.Decisions[ref]; !reflect.DeepEqual(got, []string{"cluster-1"}) {
		t.Errorf("decisions of %s = %v, want [cluster-1]", ref, got)
	}
}

// createPlacementDecision creates, in namespace, the PlacementDecision of OCM Placement placement
// naming clusters (as OCM's placement controller would), and deletes it when the test ends.
func createPlacementDecision(ctx context.Context, t *testing.T, namespace, placement string, clusters ...string) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, namespace)
	decision := object(t, `{"apiVersion":"cluster.open-cluster-management.io/v1beta1","kind":"PlacementDecision"}`)
	decision.SetNamespace(namespace)
	decision.SetName(placement + "-decision-1")
	decision.SetLabels(map[string]string{"cluster.open-cluster-management.io/placement": placement})
	if err := hub.Create(ctx, decision); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), decision) })
	setPlacementDecision(ctx, t, namespace, placement, clusters...)
}

// setPlacementDecision sets the clusters of the PlacementDecision createPlacementDecision made,
// as OCM's placement controller writes them: in its status.
func setPlacementDecision(ctx context.Context, t *testing.T, namespace, placement string, clusters ...string) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		decision := object(t, `{"apiVersion":"cluster.open-cluster-management.io/v1beta1","kind":"PlacementDecision"}`)
		if err := hub.Get(ctx, client.ObjectKey{Namespace: namespace, Name: placement + "-decision-1"}, decision); err != nil {
			return err
		}
		decisions := []any{}
		for _, c := range clusters {
			decisions = append(decisions, map[string]any{"clusterName": c, "reason": "e2e"})
		}
		if err := unstructured.SetNestedSlice(decision.Object, decisions, "status", "decisions"); err != nil {
			return err
		}
		return hub.Status().Update(ctx, decision)
	})
	if err != nil {
		t.Fatalf("set the PlacementDecision's status: %v", err)
	}
}
