package e2e

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/hub/gateway"
)

// The fleet serves the APIs the rest of policyhub is built on: the hub serves policyhub's own,
// OCM's placement API and KubeVela's Application; every managed cluster serves Kyverno's policy
// kinds of both generations and both report APIs where Kyverno runs, Gatekeeper's templates
// where it runs, and every cluster the API server's own admission policies, also when asked
// through the gateway (the CEL kinds as v1beta1 where Kyverno 1.16 runs).
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
	assertServes(t, "hub", fleetOf(t).Hub.Config, hubWants)
	gatekeeperWants := []schema.GroupVersionKind{
		{Group: "templates.gatekeeper.sh", Version: "v1", Kind: "ConstraintTemplate"},
	}
	for _, c := range fleetOf(t).Managed {
		var wants []schema.GroupVersionKind
		switch {
		case c.KyvernoVersion == fleet.Kyverno116Version:
			wants = kyverno116Serves(t, c.Config, managedWants)
		case c.KyvernoVersion != "":
			wants = managedWants
		}
		if c.GatekeeperVersion != "" {
			wants = append(slices.Clip(wants), gatekeeperWants...)
		}
		if len(wants) == 0 {
			// A cluster with no policy engine but the API server's (kubernetesCluster).
			wants = []schema.GroupVersionKind{{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}}
		}
		assertServes(t, c.Name, c.Config, wants)
		through, err := gateway.ClusterConfig(fleetOf(t).Hub.Config, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		assertServes(t, c.Name+" through the gateway", through, wants)
	}
	// Discovery through the gateway is the managed cluster's, not the hub's.
	through, err := gateway.ClusterConfig(fleetOf(t).Hub.Config, "cluster-1")
	if err != nil {
		t.Fatal(err)
	}
	if served(t, through)[schema.GroupVersionKind{Group: "policyhub.io", Version: "v1alpha1", Kind: "FleetPolicy"}] {
		t.Errorf("discovery through the gateway for cluster-1 lists the hub's FleetPolicy")
	}
}

// kyverno116Serves checks what a cluster running Kyverno 1.16 does not serve, and returns what it
// serves of wants: Kyverno 1.16 serves the policies.kyverno.io kinds as v1alpha1 and v1beta1 only
// (no v1), and has no NamespacedMutatingPolicy nor NamespacedGeneratingPolicy (1.17 added them).
func kyverno116Serves(t *testing.T, cfg *rest.Config, wants []schema.GroupVersionKind) []schema.GroupVersionKind {
	t.Helper()
	got := served(t, cfg)
	for gvk := range got {
		if gvk.Group == "policies.kyverno.io" && gvk.Version != "v1alpha1" && gvk.Version != "v1beta1" {
			t.Errorf("Kyverno 1.16's cluster serves %s", gvk)
		}
		if gvk.Kind == "NamespacedMutatingPolicy" || gvk.Kind == "NamespacedGeneratingPolicy" {
			t.Errorf("Kyverno 1.16's cluster serves %s", gvk)
		}
	}
	var out []schema.GroupVersionKind
	for _, w := range wants {
		if w.Group == "policies.kyverno.io" {
			w.Version = "v1beta1"
		}
		out = append(out, w)
	}
	return out
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
