package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// What the hub serves decides what the controllers watch: KubeVela's Application, OCM's placements.

// ApplicationServed reports whether the hub serves KubeVela's core.oam.dev/v1beta1 Application
// (the manager's RESTMapper). Only then does the ApplicationPolicy controller read Applications
// (placement from their topology, the status mirror); the hub works without KubeVela.
func ApplicationServed(mgr ctrl.Manager) (bool, error) {
	return served(mgr, policyhubv1.KubeVelaApplicationGVK)
}

// OCMPlacementsServed reports whether the hub serves OCM's PlacementDecision API; only then do
// the declarations' controllers watch Placements and their decisions.
func OCMPlacementsServed(mgr ctrl.Manager) (bool, error) {
	return served(mgr, clusterv1beta1.GroupVersion.WithKind("PlacementDecision"))
}

// ClusterSetBindingsServed reports whether the hub serves OCM's ManagedClusterSetBinding API;
// only then do bindings grant tenants clusters (and the ApplicationPolicy controller watch them).
func ClusterSetBindingsServed(mgr ctrl.Manager) (bool, error) {
	return served(mgr, clusterv1beta2.GroupVersion.WithKind("ManagedClusterSetBinding"))
}

// FluxSourcesServed are the Flux source kinds (GitRepository, OCIRepository, Bucket) the hub
// serves: PolicySets read those, and their controller watches them.
func FluxSourcesServed(mgr ctrl.Manager) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, kind := range []string{"GitRepository", "OCIRepository", "Bucket"} {
		gvk := policyhubv1.FluxSourceGroupVersion.WithKind(kind)
		ok, err := served(mgr, gvk)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, gvk)
		}
	}
	return out, nil
}

// served reports whether the hub serves gvk, by the manager's RESTMapper.
func served(mgr ctrl.Manager, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up %s in the hub's API: %w", gvk, err)
	}
	return true, nil
}
