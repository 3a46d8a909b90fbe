package placement

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
)

// OCM kinds the inventory reads where OCM is installed.
var (
	ManagedClusterGVK    = schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"}
	PlacementDecisionGVK = schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "PlacementDecision"}
	PlacementGVK         = schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "Placement"}
)

// placementLabel ties a PlacementDecision to its Placement (OCM's contract).
const placementLabel = "cluster.open-cluster-management.io/placement"

// ReadInventory reads the fleet from the hub: every cluster-gateway credential Secret in
// secretNamespace (only metadata: the hub never holds the credentials), and, when the hub serves
// OCM's API, every ManagedCluster and PlacementDecision. A cluster's labels are its Secret's
// (less the credential-type label) over its ManagedCluster's.
func ReadInventory(ctx context.Context, c client.Reader, secretNamespace string) (Inventory, error) {
	byName := map[string]map[string]string{}

	// Only labels are needed: metadata, which a cached reader keeps without the objects.
	clusters := &metav1.PartialObjectMetadataList{}
	clusters.SetGroupVersionKind(ManagedClusterGVK.GroupVersion().WithKind(ManagedClusterGVK.Kind + "List"))
	ocm := true
	if err := c.List(ctx, clusters); err != nil {
		if !meta.IsNoMatchError(err) {
			return Inventory{}, fmt.Errorf("list OCM ManagedClusters: %w", err)
		}
		ocm = false
	}
	for _, mc := range clusters.Items {
		byName[mc.GetName()] = maps.Clone(mc.GetLabels())
	}

	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := c.List(ctx, secrets, client.InNamespace(secretNamespace), client.HasLabels{gateway.CredentialTypeLabel}); err != nil {
		return Inventory{}, fmt.Errorf("list cluster-gateway credential Secrets in %s: %w", secretNamespace, err)
	}
	for _, s := range secrets.Items {
		labels := byName[s.Name]
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range s.Labels {
			if k != gateway.CredentialTypeLabel {
				labels[k] = v
			}
		}
		byName[s.Name] = labels
	}

	inv := Inventory{Decisions: map[types.NamespacedName][]string{}, OCM: ocm, Placements: map[types.NamespacedName]bool{}}
	for name, labels := range byName {
		inv.Clusters = append(inv.Clusters, Cluster{Name: name, Labels: labels})
	}
	sort.Slice(inv.Clusters, func(i, j int) bool { return inv.Clusters[i].Name < inv.Clusters[j].Name })

	if !ocm {
		return inv, nil
	}
	placements := &metav1.PartialObjectMetadataList{}
	placements.SetGroupVersionKind(PlacementGVK.GroupVersion().WithKind(PlacementGVK.Kind + "List"))
	if err := c.List(ctx, placements); err != nil {
		if !meta.IsNoMatchError(err) {
			return Inventory{}, fmt.Errorf("list OCM Placements: %w", err)
		}
		inv.OCM = false
	}
	for _, p := range placements.Items {
		inv.Placements[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
	}
	decisions := &unstructured.UnstructuredList{}
	decisions.SetGroupVersionKind(PlacementDecisionGVK.GroupVersion().WithKind(PlacementDecisionGVK.Kind + "List"))
	if err := c.List(ctx, decisions, client.HasLabels{placementLabel}); err != nil {
		if meta.IsNoMatchError(err) {
			return inv, nil
		}
		return Inventory{}, fmt.Errorf("list OCM PlacementDecisions: %w", err)
	}
	for _, d := range decisions.Items {
		ref := types.NamespacedName{Namespace: d.GetNamespace(), Name: d.GetLabels()[placementLabel]}
		list, _, _ := unstructured.NestedSlice(d.Object, "status", "decisions")
		for _, item := range list {
			if m, ok := item.(map[string]any); ok {
				if name, ok := m["clusterName"].(string); ok && name != "" {
					inv.Decisions[ref] = append(inv.Decisions[ref], name)
				}
			}
		}
	}
	for ref := range inv.Decisions {
		sort.Strings(inv.Decisions[ref])
	}
	return inv, nil
}
