package work

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// kyverno120Refusal is Kyverno 1.20's refusal of a legacy write, as a ValidatingAdmissionPolicy
// standing in for it answers (kyverno#17708: "execution was removed in v1.20; the API remains
// available").
const kyverno120Refusal = `clusterpolicies.kyverno.io "no-latest" is forbidden: ValidatingAdmissionPolicy 'kyverno-1-20' with binding 'kyverno-1-20' denied request: ClusterPolicy (kyverno.io) execution was removed in v1.20; the API remains available: migrate to policies.kyverno.io/v1 ValidatingPolicy`

func legacyObject(apiVersion, kind, name, hash string, rules ...string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	if hash != "" {
		obj.SetAnnotations(map[string]string{policyhubv1.AnnotationContentHash: hash})
	}
	if len(rules) > 0 {
		var rs []any
		for _, r := range rules {
			rs = append(rs, map[string]any{"name": r, r: map[string]any{}})
		}
		_ = unstructured.SetNestedSlice(obj.Object, rs, "spec", "rules")
	}
	return obj
}

func TestLegacyKindsOf(t *testing.T) {
	objs := []*unstructured.Unstructured{
		legacyObject("policies.kyverno.io/v1", "ValidatingPolicy", "a", ""),
		legacyObject("kyverno.io/v1", "ClusterPolicy", "b", ""),
		legacyObject("kyverno.io/v1", "ClusterPolicy", "c", ""),
		legacyObject("kyverno.io/v2", "PolicyException", "d", ""),
		legacyObject("policies.kyverno.io/v1", "PolicyException", "e", ""),
	}
	got := fmt.Sprint(legacyKindsOf(objs))
	want := fmt.Sprint([]schema.GroupVersionKind{{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"}, {Group: "kyverno.io", Version: "v2", Kind: "PolicyException"}})
	if got != want {
		t.Errorf("legacyKindsOf = %s, want %s", got, want)
	}
	if k := legacyKindsOf(objs[:1]); len(k) != 0 {
		t.Errorf("a CEL policy has no legacy kind, got %v", k)
	}
}

// The message names the cluster, the evidence, the legacy kind and the CEL kind to rewrite it as.
func TestNotEnforcedMessage(t *testing.T) {
	tests := []struct {
		name string
		objs []*unstructured.Unstructured
		want []string
	}{
		{"a validating ClusterPolicy", []*unstructured.Unstructured{legacyObject("kyverno.io/v1", "ClusterPolicy", "p", "", "validate")},
			[]string{"kyverno.io/v1 ClusterPolicy", "ClusterPolicy → policies.kyverno.io/v1 ValidatingPolicy"}},
		{"a mutating Policy", []*unstructured.Unstructured{legacyObject("kyverno.io/v1", "Policy", "p", "", "mutate")},
			[]string{"kyverno.io/v1 Policy", "Policy → policies.kyverno.io/v1 NamespacedMutatingPolicy"}},
		{"validate and generate: validating first", []*unstructured.Unstructured{legacyObject("kyverno.io/v1", "ClusterPolicy", "p", "", "generate", "validate")},
			[]string{"ClusterPolicy → policies.kyverno.io/v1 ValidatingPolicy"}},
		{"a cleanup policy", []*unstructured.Unstructured{legacyObject("kyverno.io/v2", "ClusterCleanupPolicy", "p", "")},
			[]string{"kyverno.io/v2 ClusterCleanupPolicy", "ClusterCleanupPolicy → policies.kyverno.io/v1 DeletingPolicy"}},
		{"a legacy exception beside a CEL policy", []*unstructured.Unstructured{
			legacyObject("policies.kyverno.io/v1", "ValidatingPolicy", "v", ""), legacyObject("kyverno.io/v2", "PolicyException", "x", "")},
			[]string{"kyverno.io/v2 PolicyException", "PolicyException → policies.kyverno.io/v1 PolicyException", "its other objects are sent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := notEnforcedMessage("prod-1", "its Kyverno is v1.20.0 (as its agent reports)", tt.objs)
			sent := "nothing is sent"
			if len(tt.objs) > 1 {
				sent = "the legacy ones are left as they are"
			}
			for _, want := range append(tt.want, "not enforced in cluster prod-1: its Kyverno is v1.20.0", "no longer executes", "Rewrite the policy", sent) {
				if !strings.Contains(got, want) {
					t.Errorf("message %q lacks %q", got, want)
				}
			}
			if strings.Contains(got, "ValidatingPolicy served") {
				t.Errorf("message %q names a CEL kind as not executed", got)
			}
		})
	}
}

func TestVersionSaysNotEnforced(t *testing.T) {
	for version, want := range map[string]bool{"v1.20.0": true, "1.21.3": true, "v1.19.1": false, "": false, "nightly": false} {
		if got := versionSaysNotEnforced(version) != ""; got != want {
			t.Errorf("versionSaysNotEnforced(%q) = %v, want %v", version, got, want)
		}
	}
}

// Only Kyverno's legacy refusal of a legacy object's write counts: not another denial, not a
// transport error, not a CEL kind.
func TestLegacyRefusal(t *testing.T) {
	cp := legacyObject("kyverno.io/v1", "ClusterPolicy", "no-latest", "")
	vp := legacyObject("policies.kyverno.io/v1", "ValidatingPolicy", "no-latest", "")
	gr := schema.GroupResource{Group: "kyverno.io", Resource: "clusterpolicies"}
	refusal := apierrors.NewForbidden(gr, "no-latest", errors.New(kyverno120Refusal))
	webhook := apierrors.NewBadRequest(`admission webhook "validate-policy.kyverno.svc" denied the request: ClusterPolicy (kyverno.io) execution was removed in v1.20; the API remains available`)
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		err  error
		want bool
	}{
		{"the VAP's refusal", cp, refusal, true},
		{"Kyverno's webhook refusal", cp, webhook, true},
		{"wrapped", cp, fmt.Errorf("apply: %w", refusal), true},
		{"another denial", cp, apierrors.NewBadRequest(`admission webhook "validate-policy.kyverno.svc" denied the request: spec.rules[0]: invalid`), false},
		{"a deprecation warning in another denial", cp, apierrors.NewBadRequest(`admission webhook "x" denied the request: spec invalid; ClusterPolicy is deprecated and will be removed in v1.20`), false},
		{"not an API answer", cp, errors.New("dial tcp: " + kyverno120Refusal), false},
		{"a CEL kind", vp, refusal, false},
		{"no error", cp, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := legacyRefusal(tt.obj, tt.err) != ""; got != tt.want {
				t.Errorf("legacyRefusal = %v, want %v", got, tt.want)
			}
		})
	}
}

// A refusal holds for the same content under the same engine facts only; it is bounded, and
// forgotten with the declaration or the cluster.
func TestRefusalMemory(t *testing.T) {
	m := newRefusalMemory()
	d := Declaration{Source: "FleetPolicy/no-latest", Prune: true, Objects: []*unstructured.Unstructured{legacyObject("kyverno.io/v1", "ClusterPolicy", "no-latest", "h1")}}
	if _, ok := m.refused("c1", d, ""); ok {
		t.Fatal("nothing remembered yet")
	}
	m.remember("c1", d, "", "denied")
	if msg, ok := m.refused("c1", d, ""); !ok || msg != "denied" {
		t.Fatalf("refused = %q, %v; want the message", msg, ok)
	}
	if _, ok := m.refused("c2", d, ""); ok {
		t.Error("another cluster's refusal counted")
	}
	changed := d
	changed.Objects = []*unstructured.Unstructured{legacyObject("kyverno.io/v1", "ClusterPolicy", "no-latest", "h2")}
	if _, ok := m.refused("c1", changed, ""); ok {
		t.Error("a refusal of other content counted")
	}
	m.remember("c1", d, "", "denied")
	if _, ok := m.refused("c1", d, "v1.19.2"); ok {
		t.Error("a refusal under other engine facts counted")
	}
	if m.size() != 0 {
		t.Errorf("a refusal that no longer holds is kept: %d", m.size())
	}
	m.remember("c1", d, "", "denied")
	m.forget("c1", d.Source)
	if m.size() != 0 {
		t.Error("forget kept the declaration's refusal")
	}
	for i := range maxRefusals + 10 {
		other := d
		other.Source = fmt.Sprintf("FleetPolicy/p-%d", i)
		m.remember("c1", other, "", "denied")
	}
	if n := m.size(); n > maxRefusals {
		t.Errorf("%d refusals kept, at most %d", n, maxRefusals)
	}
	m.forgetCluster("c1")
	if m.size() != 0 {
		t.Error("forgetCluster kept refusals")
	}
}

// The capability decision: a declaration with a legacy object is NotEnforced where the version
// says so or a refusal of the same content under the same facts is known; never otherwise.
func TestNotEnforcedDecision(t *testing.T) {
	versions := map[string]string{"v120": "v1.20.0", "v119": "v1.19.1"}
	s, err := NewSyncer(Options{HubID: "h", Lock: LockOptions{Identity: "i"}, KyvernoVersion: func(c string) string { return versions[c] }})
	if err != nil {
		t.Fatal(err)
	}
	legacy := Declaration{Source: "FleetPolicy/a", Objects: []*unstructured.Unstructured{legacyObject("kyverno.io/v1", "ClusterPolicy", "a", "h1")}}
	cel := Declaration{Source: "FleetPolicy/b", Objects: []*unstructured.Unstructured{legacyObject("policies.kyverno.io/v1", "ValidatingPolicy", "b", "h1")}}
	prune := Declaration{Source: "FleetPolicy/a", Prune: true} // deleted: prune everything
	legacyException := Declaration{Source: "FleetPolicyException/policyhub-system/x", Objects: []*unstructured.Unstructured{legacyObject("kyverno.io/v2", "PolicyException", "x", "h1")}}
	celException := Declaration{Source: "FleetPolicyException/policyhub-system/y", Objects: []*unstructured.Unstructured{legacyObject("policies.kyverno.io/v1", "PolicyException", "y", "h1")}}
	for _, d := range []Declaration{legacy, legacyException} {
		if why := s.notEnforced("v120", d, s.kyvernoVersion("v120")); !strings.Contains(why, "v1.20.0") {
			t.Errorf("1.20, %s: %q", d.Source, why)
		}
	}
	for _, c := range []struct {
		cluster string
		d       Declaration
	}{{"v119", legacy}, {"unknown", legacy}, {"v120", cel}, {"v120", prune}, {"v120", celException}, {"v119", legacyException}} {
		if why := s.notEnforced(c.cluster, c.d, s.kyvernoVersion(c.cluster)); why != "" {
			t.Errorf("%s, %s: NotEnforced (%q)", c.cluster, c.d.Source, why)
		}
	}
	s.refusals.remember("v119", legacy, "v1.19.1", kyverno120Refusal)
	if why := s.notEnforced("v119", legacy, "v1.19.1"); !strings.Contains(why, "refused the hub's write") || !strings.Contains(why, "execution was removed in v1.20") {
		t.Errorf("refused: %q", why)
	}
	if why := s.notEnforced("v119", legacy, "v1.19.2"); why != "" {
		t.Errorf("refused under other facts still NotEnforced: %q", why)
	}
	s.Forget("v119")
}

// A declaration rendering legacy and other objects is synced without its legacy ones, which it
// holds (neither written nor pruned); one rendering only legacy objects, or none, is not split.
func TestWithoutLegacy(t *testing.T) {
	cel := legacyObject("policies.kyverno.io/v1", "ValidatingPolicy", "v", "")
	legacy := legacyObject("kyverno.io/v1", "ClusterPolicy", "c", "", "validate")
	rest, mixed := withoutLegacy(Declaration{Source: "s", Objects: []*unstructured.Unstructured{legacy, cel}, Prune: true})
	if !mixed || len(rest.Objects) != 1 || rest.Objects[0] != cel || !rest.holdLegacy || !rest.Prune || rest.Source != "s" {
		t.Errorf("mixed: %v %+v", mixed, rest)
	}
	for name, objs := range map[string][]*unstructured.Unstructured{"legacy only": {legacy}, "CEL only": {cel}, "none": nil} {
		if d, mixed := withoutLegacy(Declaration{Objects: objs}); mixed || d.holdLegacy || len(d.Objects) != len(objs) {
			t.Errorf("%s: split %v into %+v", name, mixed, d)
		}
	}
}
