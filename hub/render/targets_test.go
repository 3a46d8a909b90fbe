package render

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

// A placement on more clusters than a status can list is refused, naming the field, before
// anything is rendered or dispatched; up to the limit, clusters with the same mode share one
// rendered object (memory at fleet scale) and a cluster with another mode gets its own.
func TestFleetPolicyTargetsClusterCount(t *testing.T) {
	inventory := func(n int) placement.Inventory {
		var inv placement.Inventory
		for i := range n {
			inv.Clusters = append(inv.Clusters, placement.Cluster{Name: fmt.Sprintf("c-%04d", i), Labels: map[string]string{"env": "prod"}})
		}
		return inv
	}
	fp := fleetPolicy(t, "many", clusterPolicy)
	fp.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	audit := policyhubv1.ModeAudit
	fp.Spec.ClusterOverrides = []policyhubv1.ClusterOverride{{Clusters: []string{"c-0001"}, Mode: &audit}}

	got, err := FleetPolicyTargets("hub-a", fp, inventory(policyhubv1.MaxClusters))
	if err != nil {
		t.Fatalf("%d clusters: %v", policyhubv1.MaxClusters, err)
	}
	if len(got.Objects) != policyhubv1.MaxClusters {
		t.Fatalf("rendered for %d clusters, want %d", len(got.Objects), policyhubv1.MaxClusters)
	}
	a, b := got.Objects["c-0000"][0], got.Objects["c-0002"][0]
	if a != b {
		t.Error("two clusters with the same mode got an object each: at a thousand clusters that is a thousand copies")
	}
	if got.Objects["c-0001"][0].GetAnnotations()[policyhubv1.AnnotationContentHash] == a.GetAnnotations()[policyhubv1.AnnotationContentHash] {
		t.Error("the cluster with an Audit override got the template's own mode")
	}

	_, err = FleetPolicyTargets("hub-a", fp, inventory(policyhubv1.MaxClusters+1))
	invalid, ok := AsInvalid(err)
	if !ok || invalid.Reason != "InvalidPlacement" || !strings.Contains(err.Error(), "spec.placement selects 1001 clusters") {
		t.Fatalf("error = %v, want InvalidPlacement naming spec.placement and the count", err)
	}
}
