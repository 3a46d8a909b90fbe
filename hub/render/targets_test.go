package render

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

// Ten thousand placed clusters are rendered for each: clusters with the same mode share one
// rendered object (memory at fleet scale) and a cluster with another mode gets its own.
func TestFleetPolicyTargetsClusterCount(t *testing.T) {
	const clusters = 10000
	fp := fleetPolicy(t, "many", clusterPolicy)
	fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate} // its first rule mutates
	audit := policyhubv1.ModeAudit
	var placed []placement.Target
	for i := range clusters {
		target := placement.Target{Cluster: fmt.Sprintf("c-%04d", i)}
		if i == 1 { // a cluster override's mode
			target.Mode = &audit
		}
		placed = append(placed, target)
	}

	got, err := FleetPolicyTargets("hub-a", fp, placed, nil)
	if err != nil {
		t.Fatalf("%d clusters: %v", clusters, err)
	}
	if len(got.Objects) != clusters {
		t.Fatalf("rendered for %d clusters, want %d", len(got.Objects), clusters)
	}
	a, b := got.Objects["c-0000"][0], got.Objects["c-0002"][0]
	if a != b {
		t.Error("two clusters with the same mode got an object each: at a thousand clusters that is a thousand copies")
	}
	if got.Objects["c-0001"][0].GetAnnotations()[policyhubv1.AnnotationContentHash] == a.GetAnnotations()[policyhubv1.AnnotationContentHash] {
		t.Error("the cluster with an Audit override got the template's own mode")
	}
}

// Under a rollout each placed cluster gets the version and mode the rollout chooses: the
// current template in Audit or Enforce, an older template kept until its wave is reached, or
// nothing (held).
func TestFleetPolicyRolloutTargets(t *testing.T) {
	fp := fleetPolicy(t, "staged", clusterPolicy)
	fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}
	placed := []placement.Target{{Cluster: "a"}, {Cluster: "b"}, {Cluster: "c"}, {Cluster: "d"}}
	old := fp.Spec.Template.DeepCopy()
	old.Metadata.Annotations = map[string]string{"version": "old"}
	got, err := FleetPolicyTargets("hub-a", fp, placed, map[string]Version{
		"a": {Mode: policyhubv1.ModeEnforce},
		"b": {Mode: policyhubv1.ModeAudit},
		"c": {Template: old, Revision: "r0", Mode: policyhubv1.ModeEnforce},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Held, ",") != "d" || got.Objects["d"] != nil {
		t.Fatalf("held %v, d got %v; want d held", got.Held, got.Objects["d"])
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
}

// The Audit of a cluster override and of a rollout wave reach the rendered object through
// SetMode: nothing in it enforces, whatever overrides the template carries, while a cluster left
// to the template keeps its enforcement.
func TestAuditTargetsLeaveNoEnforcement(t *testing.T) {
	fp := fleetPolicy(t, "p", overridesClusterPolicy)
	fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityVerifyImages}
	audit := policyhubv1.ModeAudit
	placed := []placement.Target{{Cluster: "audited", Mode: &audit}, {Cluster: "template"}}

	got, err := FleetPolicyTargets("hub-a", fp, placed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if found := enforcingActions(got.Objects["audited"][0].Object, ""); len(found) > 0 {
		t.Errorf("the cluster override's Audit left enforcement in place: %v", found)
	}
	if len(enforcingActions(got.Objects["template"][0].Object, "")) == 0 {
		t.Error("the cluster without override lost the template's enforcement")
	}

	got, err = FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "audited"}, {Cluster: "template"}},
		map[string]Version{"audited": {Mode: policyhubv1.ModeAudit}, "template": {Mode: policyhubv1.ModeEnforce}})
	if err != nil {
		t.Fatal(err)
	}
	if found := enforcingActions(got.Objects["audited"][0].Object, ""); len(found) > 0 {
		t.Errorf("the rollout wave's Audit left enforcement in place: %v", found)
	}
}

// A FleetPolicy ships its template only as its spec.allow lets it, whether or not any cluster is
// placed yet, and an older template a rollout keeps is held to the same spec.allow.
func TestFleetPolicyTargetsRefuseWhatIsNotAllowed(t *testing.T) {
	fp := fleetPolicy(t, "injector", clusterPolicy) // its first rule mutates
	for _, placed := range [][]placement.Target{nil, {{Cluster: "a"}}} {
		got, err := FleetPolicyTargets("hub-a", fp, placed, nil)
		invalid, ok := AsInvalid(err)
		if !ok || invalid.Reason != "TemplateNotAllowed" || got != nil || !strings.Contains(err.Error(), "spec.template: spec.rules[0] (add-owner) mutate needs Mutate") {
			t.Fatalf("%d placed: got %v, %v; want TemplateNotAllowed naming the rule", len(placed), got, err)
		}
	}
	validating := fleetPolicy(t, "checker", validatingPolicy)
	old := fp.Spec.Template.DeepCopy()
	_, err := FleetPolicyTargets("hub-a", validating, []placement.Target{{Cluster: "a"}, {Cluster: "b"}},
		map[string]Version{"a": {Mode: policyhubv1.ModeAudit}, "b": {Template: old, Revision: "r0", Mode: policyhubv1.ModeEnforce}})
	if invalid, ok := AsInvalid(err); !ok || invalid.Reason != "TemplateNotAllowed" {
		t.Fatalf("a rollout's older mutating template: %v, want TemplateNotAllowed", err)
	}
	fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}
	if _, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a"}}, nil); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}
