package render

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

func setMember(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	u.SetName(name)
	u.SetLabels(map[string]string{"team": "platform", policyhubv1.LabelManagedBy: "someone-else"})
	return u
}

// A set's members are rendered once per mode and shared by the clusters of that mode; the mode
// rewrites the validating members only, and the members as read are never changed.
func TestPolicySetTargetsShareMembersPerMode(t *testing.T) {
	validating := setMember("kyverno.io/v1", "ClusterPolicy", "require-labels", map[string]any{"rules": []any{map[string]any{
		"name": "r", "match": map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Pod"}}}}},
		"validate": map[string]any{"failureAction": "Audit", "message": "m", "pattern": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "?*"}}}},
	}}})
	mutating := setMember("policies.kyverno.io/v1", "MutatingPolicy", "add-label", map[string]any{"matchConstraints": map[string]any{}})
	members := []*unstructured.Unstructured{validating, mutating}
	before := validating.DeepCopy()

	enforce, audit := policyhubv1.ModeEnforce, policyhubv1.ModeAudit
	ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "baseline"},
		Spec: policyhubv1.PolicySetSpec{Allow: []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}}}
	placed := []placement.Target{{Cluster: "a", Mode: &enforce}, {Cluster: "b", Mode: &enforce}, {Cluster: "c", Mode: &audit, DryRun: true}, {Cluster: "d"}}
	tg, err := PolicySetTargets("hub-1", ps, SetVersion{Revision: "sha256:1", Members: members}, SetVersion{}, placed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.Objects) != 4 || len(tg.Objects["a"]) != 2 || &tg.Objects["a"][0] != &tg.Objects["b"][0] || tg.Objects["a"][0] == tg.Objects["c"][0] {
		t.Fatalf("clusters of one mode must share one rendering, and only they: %v", tg.Objects)
	}
	if !tg.DryRun["c"] || tg.DryRun["a"] {
		t.Fatalf("dry-run %v", tg.DryRun)
	}
	action := func(obj *unstructured.Unstructured) any {
		rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
		return rules[0].(map[string]any)["validate"].(map[string]any)["failureAction"]
	}
	if got := action(tg.Objects["a"][0]); got != "Enforce" {
		t.Fatalf("enforce cluster: failureAction %v", got)
	}
	if got := action(tg.Objects["d"][0]); got != "Audit" {
		t.Fatalf("no mode keeps the member's own: failureAction %v", got)
	}
	if _, found := tg.Objects["a"][1].Object["spec"].(map[string]any)["validationActions"]; found {
		t.Fatal("a mode was set on a mutating member")
	}
	for _, obj := range tg.Objects["a"] {
		if obj.GetLabels()[policyhubv1.LabelManagedBy] != "hub-1" || obj.GetLabels()["team"] != "platform" ||
			obj.GetAnnotations()[policyhubv1.AnnotationSource] != "PolicySet/baseline" || obj.GetAnnotations()[policyhubv1.AnnotationContentHash] == "" {
			t.Fatalf("%s: labels %v annotations %v", obj.GetName(), obj.GetLabels(), obj.GetAnnotations())
		}
	}
	if !equalObjects(before, validating) {
		t.Fatal("rendering changed the member as read")
	}
	if fp := tg.Fingerprint(); fp == "" {
		t.Fatal("no fingerprint")
	}
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	x, _ := a.MarshalJSON()
	y, _ := b.MarshalJSON()
	return string(x) == string(y)
}

// The fingerprint of shared lists tells apart clusters whose lists differ in content even where
// their first object and length are the same.
func TestFingerprintTellsUnsharedListsApart(t *testing.T) {
	one, two, three := setMember("kyverno.io/v1", "ClusterPolicy", "one", map[string]any{}), setMember("kyverno.io/v1", "ClusterPolicy", "two", map[string]any{}), setMember("kyverno.io/v1", "ClusterPolicy", "three", map[string]any{})
	a := &Targets{Objects: map[string][]*unstructured.Unstructured{"x": {one, two}, "y": {one, three}}}
	b := &Targets{Objects: map[string][]*unstructured.Unstructured{"x": {one, two}, "y": {one, two}}}
	if a.Fingerprint() == b.Fingerprint() {
		t.Fatal("different lists fingerprint the same")
	}
	shared := []*unstructured.Unstructured{one, two}
	c := &Targets{Objects: map[string][]*unstructured.Unstructured{"x": shared, "y": shared}}
	if c.Fingerprint() == a.Fingerprint() {
		t.Fatal("a shared list fingerprints as another")
	}
}

// During a set's rollout each cluster gets the version and mode its wave chose: the current
// version, or the stable one (kept by clusters of waves not reached); a cluster without a choice,
// or whose stable version is not at hand, is held. Targets.Revisions say which version each got.
func TestPolicySetTargetsFollowTheRollout(t *testing.T) {
	rules := func() []any {
		return []any{map[string]any{"name": "r", "validate": map[string]any{"message": "m", "pattern": map[string]any{"metadata": map[string]any{}}}}}
	}
	v1 := setMember("kyverno.io/v1", "ClusterPolicy", "team", map[string]any{"rules": rules()})
	v2 := setMember("kyverno.io/v1", "ClusterPolicy", "team", map[string]any{"rules": rules(), "background": true})
	extra := setMember("kyverno.io/v1", "ClusterPolicy", "tier", map[string]any{"rules": rules()})
	current := SetVersion{Revision: "sha256:2", Members: []*unstructured.Unstructured{v2, extra}}
	stable := SetVersion{Revision: "sha256:1", Members: []*unstructured.Unstructured{v1}}
	ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "libs"}}
	placed := []placement.Target{{Cluster: "staging"}, {Cluster: "prod"}, {Cluster: "held"}}
	choices := map[string]SetChoice{"staging": {Mode: policyhubv1.ModeAudit}, "prod": {Stable: true, Mode: policyhubv1.ModeEnforce}}
	tg, err := PolicySetTargets("hub-1", ps, current, stable, placed, choices)
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.Objects["staging"]) != 2 || len(tg.Objects["prod"]) != 1 || tg.Objects["held"] != nil || fmt.Sprint(tg.Held) != "[held]" {
		t.Fatalf("objects %v held %v", tg.Objects, tg.Held)
	}
	if tg.Revisions["staging"] != "sha256:2" || tg.Revisions["prod"] != "sha256:1" || tg.Revisions["held"] != "" {
		t.Errorf("revisions %v", tg.Revisions)
	}
	if _, bg := tg.Objects["prod"][0].Object["spec"].(map[string]any)["background"]; bg {
		t.Error("prod got the current version, not the stable one")
	}
	// The stable version not at hand (its snapshot gone): prod is held rather than given the new one.
	tg, err = PolicySetTargets("hub-1", ps, current, SetVersion{}, placed, choices)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Objects["prod"] != nil || fmt.Sprint(tg.Held) != "[prod held]" {
		t.Errorf("without the stable version: objects %v held %v", tg.Objects, tg.Held)
	}
}

// A set ships what its spec.allow lets it: a version — current, or the stable one the clusters of
// waves not reached run — holding an exception, a member in the hub's namespace or a mutating
// member not allowed renders nothing, naming the member; allowed, the mutating member renders.
func TestPolicySetTargetsRefuseWhatIsNotAllowed(t *testing.T) {
	validating := setMember("policies.kyverno.io/v1", "ValidatingPolicy", "ok", map[string]any{"validations": []any{}})
	mutating := setMember("kyverno.io/v1", "ClusterPolicy", "add-init", map[string]any{"rules": []any{map[string]any{"name": "inject", "mutate": map[string]any{}}}})
	exception := setMember("kyverno.io/v2", "PolicyException", "everything", map[string]any{})
	exception.SetNamespace(policyhubv1.SyncLeaseNamespace)
	inHubNamespace := setMember("kyverno.io/v1", "Policy", "lease-guard", map[string]any{"rules": []any{map[string]any{"name": "r", "validate": map[string]any{}}}})
	inHubNamespace.SetNamespace(policyhubv1.SyncLeaseNamespace)
	placed := []placement.Target{{Cluster: "a"}}
	for _, tc := range []struct {
		name            string
		allow           []policyhubv1.PolicyCapability
		current, stable []*unstructured.Unstructured
		refused         []string
	}{
		{name: "validating only", current: []*unstructured.Unstructured{validating}},
		{name: "a mutating member", current: []*unstructured.Unstructured{validating, mutating}, refused: []string{"member ClusterPolicy add-init: spec.rules[0] (inject) mutate needs Mutate"}},
		{name: "a mutating member, allowed", allow: []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}, current: []*unstructured.Unstructured{mutating}},
		{name: "an exception, whatever is allowed", allow: []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate, policyhubv1.CapabilityGenerate, policyhubv1.CapabilityCleanup, policyhubv1.CapabilityVerifyImages},
			current: []*unstructured.Unstructured{validating, exception}, refused: []string{"member PolicyException policyhub-system/everything", "FleetPolicyExceptions"}},
		{name: "a member in the hub's namespace", current: []*unstructured.Unstructured{inHubNamespace}, refused: []string{"member Policy policyhub-system/lease-guard: metadata.namespace may not be policyhub-system"}},
		{name: "a stable version that mutates, no longer allowed", current: []*unstructured.Unstructured{validating}, stable: []*unstructured.Unstructured{mutating},
			refused: []string{"version sha256:0", "member ClusterPolicy add-init"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: "lib"}, Spec: policyhubv1.PolicySetSpec{Allow: tc.allow}}
			stable := SetVersion{Revision: "sha256:0", Members: tc.stable}
			got, err := PolicySetTargets("hub-1", ps, SetVersion{Revision: "sha256:1", Members: tc.current}, stable, placed, nil)
			if len(tc.refused) == 0 {
				if err != nil || len(got.Objects["a"]) != len(tc.current) {
					t.Fatalf("refused or not rendered: %v", err)
				}
				return
			}
			invalid, ok := AsInvalid(err)
			if !ok || invalid.Reason != "MemberNotAllowed" || got != nil {
				t.Fatalf("got %v, %v: want MemberNotAllowed and nothing rendered", got, err)
			}
			for _, want := range tc.refused {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
	if caps := MemberCapabilities([]*unstructured.Unstructured{validating, mutating, exception}); fmt.Sprint(caps) != "[Mutate]" {
		t.Errorf("capabilities %v, want [Mutate]", caps)
	}
}
