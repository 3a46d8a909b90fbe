package placement

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// managedClusterSetBindingList is OCM's "this namespace may place on that cluster set", read as
// metadata only: OCM requires a binding's name to be its cluster set's.
var managedClusterSetBindingList = clusterv1beta2.GroupVersion.WithKind("ManagedClusterSetBindingList")

// Grants are what a hub admin granted one tenant namespace: TenantGrants naming it and, where OCM
// runs, the cluster sets bound to it.
type Grants struct {
	Tenant string
	// TenantGrants that name the tenant.
	TenantGrants []policyhubv1.TenantGrant
	// ClusterSets bound to the tenant's namespace by OCM ManagedClusterSetBindings.
	ClusterSets []string
}

// ReadGrants reads what the hub admin granted the tenant namespace: the TenantGrants naming it,
// and the OCM ManagedClusterSetBindings in it when the hub serves OCM's API.
func ReadGrants(ctx context.Context, c client.Reader, tenant string) (Grants, error) {
	g := Grants{Tenant: tenant}
	list := &policyhubv1.TenantGrantList{}
	if err := c.List(ctx, list); err != nil {
		return Grants{}, fmt.Errorf("list TenantGrants: %w", err)
	}
	for _, tg := range list.Items {
		if slices.Contains(tg.Spec.Tenants, tenant) {
			g.TenantGrants = append(g.TenantGrants, tg)
		}
	}
	bindings := &metav1.PartialObjectMetadataList{}
	bindings.SetGroupVersionKind(managedClusterSetBindingList)
	if err := c.List(ctx, bindings, client.InNamespace(tenant)); err != nil {
		if !meta.IsNoMatchError(err) {
			return Grants{}, fmt.Errorf("list OCM ManagedClusterSetBindings in %s: %w", tenant, err)
		}
	}
	for _, b := range bindings.Items {
		g.ClusterSets = append(g.ClusterSets, b.GetName())
	}
	sort.Strings(g.ClusterSets)
	return g, nil
}

// Reach is where a tenant's policies may go: (cluster, namespace) pairs, from its grants.
type Reach struct {
	tenant string
	areas  []area
}

type area struct {
	clusters   sets.Set[string]
	namespaces []string // empty: the tenant's own namespace name only
}

// ReachOf resolves the tenant's grants against the inventory. A grant's cluster selection is a
// placement like any other (names, labels, an OCM Placement); a bound OCM cluster set reaches its
// clusters (OCM's cluster-set label), in the namespace named like the tenant's.
func ReachOf(g Grants, inv Inventory) (Reach, error) {
	r := Reach{tenant: g.Tenant}
	for _, tg := range g.TenantGrants {
		selected, _, err := Select(tg.Spec.Clusters, inv, "")
		if err != nil {
			return Reach{}, fmt.Errorf("TenantGrant %s: spec.clusters: %w", tg.Name, err)
		}
		r.areas = append(r.areas, area{clusters: sets.New(selected...), namespaces: tg.Spec.Namespaces})
	}
	for _, cs := range g.ClusterSets {
		clusters := sets.New[string]()
		for _, c := range inv.Clusters {
			if c.Labels[clusterv1beta2.ClusterSetLabel] == cs {
				clusters.Insert(c.Name)
			}
		}
		r.areas = append(r.areas, area{clusters: clusters})
	}
	return r, nil
}

// Allows says whether the tenant may place policies in the namespace of the cluster. The hub's
// sync Lease namespace (policyhubv1.SyncLeaseNamespace) is never a tenant's, whatever a grant
// names: a policy there that denied updates of the Lease would lock the hub out of the cluster.
func (r Reach) Allows(cluster, namespace string) bool {
	if namespace == policyhubv1.SyncLeaseNamespace {
		return false
	}
	for _, a := range r.areas {
		if !a.clusters.Has(cluster) {
			continue
		}
		if len(a.namespaces) == 0 && namespace == r.tenant || slices.Contains(a.namespaces, namespace) {
			return true
		}
	}
	return false
}
