package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ApplicationGVK is KubeVela's Application.
var ApplicationGVK = schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"}

// ApplicationServed reports whether the hub serves KubeVela's core.oam.dev/v1beta1 Application
// (the manager's RESTMapper). Only then does the ApplicationPolicy controller read Applications
// (placement from their topology, the status mirror); the hub works without KubeVela.
func ApplicationServed(mgr ctrl.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(ApplicationGVK.GroupKind(), ApplicationGVK.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up %s in the hub's API: %w", ApplicationGVK, err)
	}
	return true, nil
}
