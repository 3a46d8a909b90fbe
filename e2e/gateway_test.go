package e2e

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
)

// Through cluster-gateway, the project's per-cluster client sees the managed cluster's own
// objects: a namespace that exists only in cluster-2 is listed through the gateway for cluster-2 and
// not for cluster-1, both through the hub's aggregation layer and at the gateway's own URL.
func TestGatewayListsNamespacesOfManagedCluster(t *testing.T) {
	ctx := testContext(t)
	const only = "only-in-cluster-2"
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-2").Config), only)

	for _, route := range []struct {
		name string
		base *rest.Config
	}{
		{"through the hub's aggregation layer", fleetOf(t).Hub.Config},
		{"at the gateway's own URL", fleetOf(t).GatewayConfig()},
	} {
		t.Run(route.name, func(t *testing.T) {
			names := func(cluster string) []string {
				cfg, err := gateway.ClusterConfig(route.base, cluster)
				if err != nil {
					t.Fatal(err)
				}
				cs, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					t.Fatal(err)
				}
				list, err := cs.CoreV1().Namespaces().List(ctx, listAll)
				if err != nil {
					t.Fatalf("list namespaces of %s through the gateway: %v", cluster, err)
				}
				var names []string
				for _, ns := range list.Items {
					names = append(names, ns.Name)
				}
				return names
			}
			if got := names("cluster-2"); !slices.Contains(got, only) {
				t.Errorf("cluster-2 through the gateway: namespaces %v lack %q", got, only)
			}
			if got := names("cluster-1"); slices.Contains(got, only) {
				t.Errorf("cluster-1 through the gateway lists %q, which exists only in cluster-2", only)
			}
		})
	}
}

// A server-side apply of a Kyverno ClusterPolicy through the gateway lands in the managed cluster
// (visible there directly, field manager policyhub) and in no other cluster. The client's
// RESTMapper discovers Kyverno's CRDs through the gateway: the hub does not serve them.
func TestGatewayServerSideApplyClusterPolicy(t *testing.T) {
	ctx := testContext(t)
	policy := object(t, auditTemplate("gateway-apply"))
	policy.SetName("e2e-gateway-apply")
	apply(ctx, t, gatewayClient(t, "cluster-1"), policy)

	key := types.NamespacedName{Name: policy.GetName()}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"})
	if err := directClient(t, fleetOf(t).Cluster("cluster-1").Config).Get(ctx, key, live); err != nil {
		t.Fatalf("the ClusterPolicy applied through the gateway is not in cluster-1: %v", err)
	}
	var managers []string
	for _, mf := range live.GetManagedFields() {
		managers = append(managers, mf.Manager)
	}
	if !slices.Contains(managers, "policyhub") {
		t.Errorf("field managers of the applied ClusterPolicy = %v, want policyhub among them", managers)
	}
	rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
	if len(rules) != 1 {
		t.Errorf("the ClusterPolicy in cluster-1 has %d rules, want 1", len(rules))
	}
	other := live.DeepCopy()
	err := directClient(t, fleetOf(t).Cluster("cluster-2").Config).Get(ctx, key, other)
	if client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("cluster-2 Get of the ClusterPolicy applied to cluster-1: %v, want NotFound", err)
	}
	t.Cleanup(func() { _ = gatewayClient(t, "cluster-1").Delete(ctx, live) })
}
