package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/hub/gateway"
)

// The fleet serves the APIs the rest of policyhub is built on: the hub serves policyhub's own,
// OCM's placement API and KubeVela's Application; every managed cluster serves Kyverno's policy
// kinds of both generations and both report APIs, also when asked through the gateway.
func TestFleetServesTheAPIsPolicyhubUses(t *testing.T) {
	hubWants := []schema.GroupVersionKind{
		{Group: "policyhub.io", Version: "v1alpha1", Kind: "FleetPolicy"},
		{Group: "policyhub.io", Version: "v1alpha1", Kind: "ApplicationPolicy"},
		{Group: "policyhub.io", Version: "v1alpha1", Kind: "PolicyReportSummary"},
		{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"},
		{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "Placement"},
		{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Kind: "PlacementDecision"},
		{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"},
		{Group: "core.oam.dev", Version: "v1beta1", Kind: "PolicyDefinition"},
		{Group: "cluster.core.oam.dev", Version: "v1alpha1", Kind: "ClusterGateway"},
	}
	managedWants := []schema.GroupVersionKind{
		{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"},
		{Group: "kyverno.io", Version: "v1", Kind: "Policy"},
		{Group: "policies.kyverno.io", Version: "v1", Kind: "ValidatingPolicy"},
		{Group: "policies.kyverno.io", Version: "v1", Kind: "NamespacedValidatingPolicy"},
		{Group: "policies.kyverno.io", Version: "v1", Kind: "PolicyException"},
		{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"},
		{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "ClusterPolicyReport"},
		{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"},
		{Group: "openreports.io", Version: "v1alpha1", Kind: "ClusterReport"},
	}
	assertServes(t, "hub", testFleet.Hub.Config, hubWants)
	for _, c := range testFleet.Managed {
		assertServes(t, c.Name, c.Config, managedWants)
		through, err := gateway.ClusterConfig(testFleet.Hub.Config, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		assertServes(t, c.Name+" through the gateway", through, managedWants)
	}
	// Discovery through the gateway is the managed cluster's, not the hub's.
	through, err := gateway.ClusterConfig(testFleet.Hub.Config, "cluster-1")
	if err != nil {
		t.Fatal(err)
	}
	if served(t, through)[schema.GroupVersionKind{Group: "policyhub.io", Version: "v1alpha1", Kind: "FleetPolicy"}] {
		t.Errorf("discovery through the gateway for cluster-1 lists the hub's FleetPolicy")
	}
}

func assertServes(t *testing.T, name string, cfg *rest.Config, wants []schema.GroupVersionKind) {
	t.Helper()
	got := served(t, cfg)
	for _, want := range wants {
		if !got[want] {
			t.Errorf("%s does not serve %s", name, want)
		}
	}
}

func served(t *testing.T, cfg *rest.Config) map[schema.GroupVersionKind]bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery of %s: %v", cfg.Host, err)
	}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			kinds[gv.WithKind(r.Kind)] = true
		}
	}
	return kinds
}
