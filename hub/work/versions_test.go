package work

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// mapperServing is a RESTMapper of a cluster that serves the policies.kyverno.io kinds at versions.
func mapperServing(versions ...string) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, v := range versions {
		for _, kind := range []string{"ValidatingPolicy", "MutatingPolicy", "PolicyException"} {
			m.Add(schema.GroupVersionKind{Group: celGroup, Version: v, Kind: kind}, meta.RESTScopeRoot)
		}
	}
	m.Add(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"}, meta.RESTScopeRoot)
	return m
}

func celObject(apiVersion, kind string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": "p"},
		"spec":     spec,
	}}
}

// A policies.kyverno.io object goes at the version the cluster serves for its kind: v1 where
// served (whatever the declaration says), v1beta1 on Kyverno 1.16, which serves no v1; the
// content is unchanged, and the declaration's own objects are never changed (every cluster shares
// them).
func TestServedVersions(t *testing.T) {
	spec := map[string]any{"validations": []any{map[string]any{"expression": "true"}}}
	tests := []struct {
		name    string
		served  []string
		objects []*unstructured.Unstructured
		want    []string // apiVersions sent; nil: sent as written
	}{
		{"v1 to a 1.16 cluster", []string{"v1alpha1", "v1beta1"},
			[]*unstructured.Unstructured{celObject("policies.kyverno.io/v1", "ValidatingPolicy", spec)},
			[]string{"policies.kyverno.io/v1beta1"}},
		{"v1beta1 to a 1.19 cluster", []string{"v1alpha1", "v1beta1", "v1"},
			[]*unstructured.Unstructured{celObject("policies.kyverno.io/v1beta1", "ValidatingPolicy", spec)},
			[]string{"policies.kyverno.io/v1"}},
		{"v1 to a 1.19 cluster", []string{"v1alpha1", "v1beta1", "v1"},
			[]*unstructured.Unstructured{celObject("policies.kyverno.io/v1", "ValidatingPolicy", spec)}, nil},
		{"v1beta1 to a 1.16 cluster", []string{"v1alpha1", "v1beta1"},
			[]*unstructured.Unstructured{celObject("policies.kyverno.io/v1beta1", "ValidatingPolicy", spec)}, nil},
		{"v1alpha1 stays as written", []string{"v1alpha1", "v1beta1", "v1"},
			[]*unstructured.Unstructured{celObject("policies.kyverno.io/v1alpha1", "ValidatingPolicy", spec)}, nil},
		{"other groups stay as written", []string{"v1beta1"},
			[]*unstructured.Unstructured{celObject("kyverno.io/v1", "ClusterPolicy", spec), celObject("policies.kyverno.io/v1", "ValidatingPolicy", spec)},
			[]string{"kyverno.io/v1", "policies.kyverno.io/v1beta1"}},
		{"a kind served at neither version is left to the capability check", []string{"v1alpha1"},
			[]*unstructured.Unstructured{celObject("policies.kyverno.io/v1", "ValidatingPolicy", spec)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := make([]string, len(tt.objects))
			for i, o := range tt.objects {
				before[i] = o.GetAPIVersion()
			}
			adapted, unsupported, err := servedVersions(mapperServing(tt.served...), "c", tt.objects)
			if err != nil || unsupported != "" {
				t.Fatalf("servedVersions: %q, %v", unsupported, err)
			}
			if tt.want == nil {
				if adapted != nil {
					t.Fatalf("objects sent as written should not be copied, got %v", adapted)
				}
				return
			}
			for i, o := range adapted {
				if o.GetAPIVersion() != tt.want[i] {
					t.Errorf("object %d sent as %s, want %s", i, o.GetAPIVersion(), tt.want[i])
				}
				got, _, _ := unstructured.NestedSlice(o.Object, "spec", "validations")
				if len(got) != 1 {
					t.Errorf("object %d lost its content: %v", i, o.Object)
				}
				if tt.objects[i].GetAPIVersion() != before[i] {
					t.Errorf("the declaration's object %d was changed to %s", i, tt.objects[i].GetAPIVersion())
				}
			}
		})
	}
}

// A field Kyverno 1.16's v1beta1 lacks makes the declaration Unsupported there, naming the field
// (nothing is sent); the same object goes where v1 is served.
func TestServedVersionsFieldMissingIn116(t *testing.T) {
	exception := celObject("policies.kyverno.io/v1", "PolicyException", map[string]any{
		"policyRefs": []any{map[string]any{"kind": "ValidatingPolicy", "name": "p"}},
		"expiresAt":  "2030-01-01T00:00:00Z",
	})
	mutating := celObject("policies.kyverno.io/v1", "MutatingPolicy", map[string]any{
		"mutations": []any{map[string]any{"patchType": "ApplyConfiguration", "applyConfiguration": map[string]any{"expression": "Object{}"}}},
	})
	for _, tt := range []struct {
		obj  *unstructured.Unstructured
		want []string
	}{
		{exception, []string{"cluster c serves policies.kyverno.io PolicyException only as v1beta1 (Kyverno 1.16)", "no field spec.expiresAt", "nothing was sent"}},
		{mutating, []string{"MutatingPolicy", "no field spec.mutations[].applyConfiguration, spec.mutations[].patchType", "upgrade its Kyverno to a version that has it"}},
	} {
		adapted, unsupported, err := servedVersions(mapperServing("v1alpha1", "v1beta1"), "c", []*unstructured.Unstructured{tt.obj})
		if err != nil || adapted != nil {
			t.Fatalf("%s: want nothing sent, got %v, %v", tt.obj.GetKind(), adapted, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(unsupported, w) {
				t.Errorf("%s: message %q lacks %q", tt.obj.GetKind(), unsupported, w)
			}
		}
		if _, unsupported, err := servedVersions(mapperServing("v1beta1", "v1"), "c", []*unstructured.Unstructured{tt.obj}); unsupported != "" || err != nil {
			t.Errorf("%s where v1 is served: %q, %v", tt.obj.GetKind(), unsupported, err)
		}
	}
	// A v1beta1 ValidatingPolicy has every field of v1 in 1.16: nothing to refuse.
	if _, unsupported, _ := servedVersions(mapperServing("v1beta1"), "c", []*unstructured.Unstructured{celObject("policies.kyverno.io/v1", "ValidatingPolicy", map[string]any{"auditAnnotations": []any{}})}); unsupported != "" {
		t.Errorf("ValidatingPolicy refused: %s", unsupported)
	}
}

// Declarations are copied only when one changes; the caller's slice is never written.
func TestForServedVersions(t *testing.T) {
	decls := []Declaration{
		{Source: "a", Objects: []*unstructured.Unstructured{celObject("kyverno.io/v1", "ClusterPolicy", nil)}},
		{Source: "b", Objects: []*unstructured.Unstructured{celObject("policies.kyverno.io/v1", "ValidatingPolicy", nil)}},
		{Source: "c", Objects: []*unstructured.Unstructured{celObject("policies.kyverno.io/v1", "PolicyException", map[string]any{"expiresAt": "x"})}},
	}
	out, unsupported, errs := forServedVersions(mapperServing("v1beta1"), "c", decls)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("errors: %v", errs)
	}
	if unsupported[0] != "" || unsupported[1] != "" || !strings.Contains(unsupported[2], "spec.expiresAt") {
		t.Errorf("unsupported = %q", unsupported)
	}
	if got := out[1].Objects[0].GetAPIVersion(); got != "policies.kyverno.io/v1beta1" {
		t.Errorf("declaration b sent as %s", got)
	}
	if got := decls[1].Objects[0].GetAPIVersion(); got != "policies.kyverno.io/v1" {
		t.Errorf("the caller's declaration b was changed to %s", got)
	}
	if out[0].Objects[0] != decls[0].Objects[0] {
		t.Errorf("declaration a, unchanged, was copied")
	}
}
