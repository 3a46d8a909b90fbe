package placement

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
)

// AddToScheme registers the OCM kinds ReadInventory reads typed (PlacementDecision, from OCM's
// own API module); every client that reads the inventory needs them in its scheme.
func AddToScheme(s *runtime.Scheme) error {
	return clusterv1beta1.Install(s)
}

// ManagedCluster and Placement are read as metadata only (labels and existence).
var (
	managedClusterList = clusterv1.GroupVersion.WithKind("ManagedClusterList")
	placementList      = clusterv1beta1.GroupVersion.WithKind("PlacementList")
)

// CredentialSecrets lists the metadata of cluster-gateway's credential Secrets in secretNamespace:
// one per cluster of the fleet, named after it (the hub never reads the credentials).
func CredentialSecrets(ctx context.Context, c client.Reader, secretNamespace string) ([]metav1.PartialObjectMetadata, error) {
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := c.List(ctx, secrets, client.InNamespace(secretNamespace), client.HasLabels{gateway.CredentialTypeLabel}); err != nil {
		return nil, fmt.Errorf("list cluster-gateway credential Secrets in %s: %w", secretNamespace, err)
	}
	return secrets.Items, nil
}

// ReadInventory reads the fleet from the hub: every cluster-gateway credential Secret in
// secretNamespace (only metadata: the hub never holds the credentials), and, when the hub serves
// OCM's API, every ManagedCluster and PlacementDecision. A cluster's labels are its Secret's
// (less the credential-type label) over its ManagedCluster's.
func ReadInventory(ctx context.Context, c client.Reader, secretNamespace string) (Inventory, error) {
	byName := map[string]map[string]string{}

	// Only labels are needed: metadata, which a cached reader keeps without the objects.
	clusters := &metav1.PartialObjectMetadataList{}
	clusters.SetGroupVersionKind(managedClusterList)
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

	secrets, err := CredentialSecrets(ctx, c, secretNamespace)
	if err != nil {
		return Inventory{}, err
	}
	for _, s := range secrets {
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
	placements.SetGroupVersionKind(placementList)
	if err := c.List(ctx, placements); err != nil {
		if !meta.IsNoMatchError(err) {
			return Inventory{}, fmt.Errorf("list OCM Placements: %w", err)
		}
		inv.OCM = false
	}
	for _, p := range placements.Items {
		inv.Placements[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
	}
	decisions := &clusterv1beta1.PlacementDecisionList{}
	if err := c.List(ctx, decisions, client.HasLabels{clusterv1beta1.PlacementLabel}); err != nil {
		if meta.IsNoMatchError(err) {
			return inv, nil
		}
		return Inventory{}, fmt.Errorf("list OCM PlacementDecisions: %w", err)
	}
	for _, d := range decisions.Items {
		ref := types.NamespacedName{Namespace: d.Namespace, Name: d.Labels[clusterv1beta1.PlacementLabel]}
		for _, decision := range d.Status.Decisions {
			if decision.ClusterName != "" {
				inv.Decisions[ref] = append(inv.Decisions[ref], decision.ClusterName)
			}
		}
	}
	for ref := range inv.Decisions {
		sort.Strings(inv.Decisions[ref])
	}
	return inv, nil
}
