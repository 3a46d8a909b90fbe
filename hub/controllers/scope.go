package controllers

import (
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ScopeCache narrows a hub's cache (CacheOptions) to the declarations whose labels match
// selector: a hub started with it sees, and so reconciles, only those. Several hubs then run side
// by side on one hub cluster, each with its own declarations, as Flux's controllers do with
// --watch-label-selector; each cluster's sync Lease still keeps their writers apart (the e2e
// tests that run in parallel on one fleet each start such a hub, with a Lease of its own name:
// their objects never meet).
func ScopeCache(o cache.Options, selector labels.Selector) cache.Options {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	for _, k := range policyhubv1.DeclarationKinds() {
		o.ByObject[k.New()] = cache.ByObject{Label: selector}
	}
	return o
}
