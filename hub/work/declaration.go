package work

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
)

// Cluster is a managed cluster and the config that reaches it (through the gateway).
type Cluster struct {
	Name   string
	Config *rest.Config
}

// Declaration is what one declaration wants in one cluster.
type Declaration struct {
	// Source identifies the declaration (render.Owner.Source()).
	Source string
	// Objects are its rendered objects for this cluster; none means "nothing here" (prune all).
	Objects []*unstructured.Unstructured
	// DryRun sends the same requests with dryRun=All: admission runs, nothing persists.
	DryRun bool
	// Prune deletes owned objects it no longer renders.
	Prune bool
	// Tenant is the hub namespace whose budget its objects count against (see admit): an
	// ApplicationPolicy's, a KubeVela Application's, a tenant's FleetPolicyException's. Empty for
	// the platform's declarations (cluster-scoped, or in the hub's namespace): no budget bounds them.
	Tenant string
	// Created is when the declaration was created: within a tenant's budget the oldest come first.
	Created time.Time
	// holdLegacy leaves its live legacy objects as they are (see withoutLegacy): set by a pass
	// in a cluster whose Kyverno does not execute them, for a declaration rendering other kinds too.
	holdLegacy bool
}
