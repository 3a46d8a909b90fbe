package render

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	fp.Spec.Placement.ClusterSelector = &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"env": "prod"}}
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

// Under a rollout each placed cluster gets the version and mode the rollout chooses: the
// current template in Audit or Enforce, an older template kept until its wave is reached, or
// nothing (held).
func TestFleetPolicyRolloutTargets(t *testing.T) {
	fp := fleetPolicy(t, "staged", clusterPolicy)
	fp.Spec.Placement.Clusters = []string{"a", "b", "c", "d"}
	inv := placement.Inventory{Clusters: []placement.Cluster{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}
	old := fp.Spec.Template.DeepCopy()
	old.Metadata.Annotations = map[string]string{"version": "old"}
	var placedSeen []string
	got, err := FleetPolicyRolloutTargets("hub-a", fp, inv, func(placed []string) (map[string]Version, error) {
		placedSeen = placed
		return map[string]Version{
			"a": {Mode: policyhubv1.ModeEnforce},
			"b": {Mode: policyhubv1.ModeAudit},
			"c": {Template: old, Revision: "r0", Mode: policyhubv1.ModeEnforce},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(placedSeen, ",") != "a,b,c,d" || strings.Join(got.Held, ",") != "d" || got.Objects["d"] != nil {
		t.Fatalf("placed %v, held %v, d got %v; want every placed cluster offered and d held", placedSeen, got.Held, got.Objects["d"])
	}
	if got.Objects["c"][0].GetAnnotations()["version"] != "old" || got.Objects["a"][0].GetAnnotations()["version"] != "" {
		t.Error("c must keep the old template and a get the current one")
	}
	action := func(cluster string) string {
		rules, _, _ := unstructured.NestedSlice(got.Objects[cluster][0].Object, "spec", "rules")
		a, _, _ := unstructured.NestedString(rules[1].(map[string]any), "validate", "failureAction") // rules[0] mutates
		return a
	}
	if action("a") != "Enforce" || action("b") != "Audit" || action("c") != "Enforce" {
		t.Errorf("failure actions a=%s b=%s c=%s, want Enforce, Audit, Enforce", action("a"), action("b"), action("c"))
	}
	if !strings.Contains(got.Fingerprint(), "[d]") {
		t.Errorf("fingerprint %q does not change with the held clusters", got.Fingerprint())
	}
	_, err = FleetPolicyRolloutTargets("hub-a", fp, inv, func([]string) (map[string]Version, error) { return nil, fmt.Errorf("spec.rollout.waves[0]: bad") })
	if invalid, ok := AsInvalid(err); !ok || invalid.Reason != "InvalidRollout" {
		t.Errorf("a chooser's error: %v, want InvalidRollout", err)
	}
}

// The Audit of a cluster override and of a rollout wave reach the rendered object through
// SetMode: nothing in it enforces, whatever overrides the template carries, while a cluster left
// to the template keeps its enforcement.
func TestAuditTargetsLeaveNoEnforcement(t *testing.T) {
	fp := fleetPolicy(t, "p", overridesClusterPolicy)
	fp.Spec.Placement.Clusters = []string{"audited", "template"}
	audit := policyhubv1.ModeAudit
	fp.Spec.ClusterOverrides = []policyhubv1.ClusterOverride{{Clusters: []string{"audited"}, Mode: &audit}}
	inv := placement.Inventory{Clusters: []placement.Cluster{{Name: "audited"}, {Name: "template"}}}

	got, err := FleetPolicyTargets("hub-a", fp, inv)
	if err != nil {
		t.Fatal(err)
	}
	if found := enforcingActions(got.Objects["audited"][0].Object, ""); len(found) > 0 {
		t.Errorf("the cluster override's Audit left enforcement in place: %v", found)
	}
	if len(enforcingActions(got.Objects["template"][0].Object, "")) == 0 {
		t.Error("the cluster without override lost the template's enforcement")
	}

	fp.Spec.ClusterOverrides = nil
	got, err = FleetPolicyRolloutTargets("hub-a", fp, inv, func([]string) (map[string]Version, error) {
		return map[string]Version{"audited": {Mode: policyhubv1.ModeAudit}, "template": {Mode: policyhubv1.ModeEnforce}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found := enforcingActions(got.Objects["audited"][0].Object, ""); len(found) > 0 {
		t.Errorf("the rollout wave's Audit left enforcement in place: %v", found)
	}
}
