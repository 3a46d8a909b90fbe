package e2e

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var clusterPolicyGVK = schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"}

// presence reports in which clusters a ClusterPolicy named name exists.
func presence(t *testing.T, name string) map[string]bool {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(clusterPolicyGVK)
	obj.SetName(name)
	out := map[string]bool{}
	for _, c := range []string{"cluster-1", "cluster-2"} {
		_, err := liveObject(t, c, obj)
		out[c] = err == nil
	}
	return out
}

func waitPresence(t *testing.T, name string, want map[string]bool) {
	t.Helper()
	eventually(t, 60*time.Second, 200*time.Millisecond, "ClusterPolicy "+name+" where placed", func() error {
		if got := presence(t, name); got["cluster-1"] != want["cluster-1"] || got["cluster-2"] != want["cluster-2"] {
			return errorf("present %v, want %v", got, want)
		}
		return nil
	})
}

// FleetPolicies are synced where their placement says: by cluster name, by cluster labels (and a
// label change on a cluster's gateway Secret adds or prunes the policy there), and by an OCM
// PlacementDecision.
func TestHubPlacesByNamesLabelsAndOCMDecisions(t *testing.T) {
	inParallel(t)
	startHub(t, 10*time.Minute)

	createFleetPolicy(t, `
metadata: {name: e2e-by-name}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("by-name"))
	waitFleetPolicy(t, "e2e-by-name", "synced in cluster-1 only", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	waitPresence(t, "e2e-by-name", map[string]bool{"cluster-1": true})

	createFleetPolicy(t, `
metadata: {name: e2e-by-label}
spec:
  placement: {clusterSelector: {matchLabels: {env: prod}}}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("by-label"))
	waitFleetPolicy(t, "e2e-by-label", "synced in the prod cluster", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))
	waitPresence(t, "e2e-by-label", map[string]bool{"cluster-2": true})

	ctx := testContext(t)
	if err := fleetOf(t).SetClusterLabels(ctx, "cluster-1", map[string]string{"env": "prod"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleetOf(t).SetClusterLabels(ctx, "cluster-1", map[string]string{"env": "staging"}) })
	waitFleetPolicy(t, "e2e-by-label", "synced in both once cluster-1 is labelled prod",
		wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	waitPresence(t, "e2e-by-label", map[string]bool{"cluster-1": true, "cluster-2": true})

	if err := fleetOf(t).SetClusterLabels(ctx, "cluster-1", map[string]string{"env": "staging"}); err != nil {
		t.Fatal(err)
	}
	waitFleetPolicy(t, "e2e-by-label", "pruned from cluster-1 once it is staging again", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))
	waitPresence(t, "e2e-by-label", map[string]bool{"cluster-2": true})

	// OCM: a PlacementDecision of Placement ocm-hub/prod-only names cluster-2.
	createPlacementDecision(ctx, t, "ocm-hub", "prod-only", "cluster-2")
	createFleetPolicy(t, `
metadata: {name: e2e-by-ocm}
spec:
  placement: {placementRef: {name: prod-only, namespace: ocm-hub}}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("by-ocm"))
	waitFleetPolicy(t, "e2e-by-ocm", "synced where OCM decided", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))
	waitPresence(t, "e2e-by-ocm", map[string]bool{"cluster-2": true})

	// OCM decides again: the FleetPolicy follows at once (the hub's resync is 10 minutes away).
	setPlacementDecision(ctx, t, "ocm-hub", "prod-only", "cluster-1")
	waitFleetPolicy(t, "e2e-by-ocm", "moved where OCM decided next", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	waitPresence(t, "e2e-by-ocm", map[string]bool{"cluster-1": true, "cluster-2": false})
}
