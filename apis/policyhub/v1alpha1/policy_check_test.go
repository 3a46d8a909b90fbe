package v1alpha1

import (
	"context"
	"math"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckPolicy refuses what the FleetPolicy CRD's CEL rules refuse in spec.template, and takes
// what they take: the rules evaluated here by the apiserver's own CEL validator, on the same
// objects.
func TestCheckPolicyAgreesWithTheCRD(t *testing.T) {
	var fleetPolicy apiextensionsv1.JSONSchemaProps
	for _, crd := range generatedCRDs(t) {
		if crd.Spec.Names.Kind == "FleetPolicy" {
			fleetPolicy = *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		}
	}
	template := schemaAt(t, fleetPolicy, "spec.template")
	s := structural(t, &template)
	validator := cel.NewValidator(s, false, math.MaxInt64)
	if validator == nil {
		t.Fatal("spec.template has no CEL rules")
	}
	policy := func(apiVersion, kind, namespace, name string, spec bool) map[string]any {
		obj := map[string]any{}
		if apiVersion != "" {
			obj["apiVersion"] = apiVersion
		}
		if kind != "" {
			obj["kind"] = kind
		}
		meta := map[string]any{}
		if name != "" {
			meta["name"] = name
		}
		if namespace != "" {
			meta["namespace"] = namespace
		}
		obj["metadata"] = meta
		if spec {
			obj["spec"] = map[string]any{"rules": []any{}}
		}
		return obj
	}
	for _, tc := range []struct {
		name string
		obj  map[string]any
	}{ // each name says whether it is refused: see refused below
		{"a ClusterPolicy", policy("kyverno.io/v1", "ClusterPolicy", "", "require-labels", true)},
		{"a ValidatingPolicy", policy("policies.kyverno.io/v1", "ValidatingPolicy", "", "disallow-latest", true)},
		{"a Policy in a namespace", policy("kyverno.io/v1", "Policy", "shop", "limits", true)},
		{"no name (a template may leave it to the FleetPolicy)", policy("kyverno.io/v1", "ClusterPolicy", "", "", true)},
		{"no apiVersion", policy("", "ClusterPolicy", "", "a", true)},
		{"not Kyverno's group", policy("v1", "ConfigMap", "", "a", true)},
		{"a look-alike group", policy("kyverno.io.evil/v1", "ClusterPolicy", "", "a", true)},
		{"no kind", policy("kyverno.io/v1", "", "", "a", true)},
		{"no spec", policy("kyverno.io/v1", "ClusterPolicy", "", "a", false)},
		{"a Policy without a namespace", policy("kyverno.io/v1", "Policy", "", "a", true)},
		{"a PolicyException without a namespace", policy("kyverno.io/v2", "PolicyException", "", "a", true)},
		{"a NamespacedValidatingPolicy without a namespace", policy("policies.kyverno.io/v1", "NamespacedValidatingPolicy", "", "a", true)},
		{"a name of 63", policy("kyverno.io/v1", "ClusterPolicy", "", strings.Repeat("a", 63), true)},
		{"a name of 64", policy("kyverno.io/v1", "ClusterPolicy", "", strings.Repeat("a", 64), true)},
		{"an upper-case name", policy("kyverno.io/v1", "ClusterPolicy", "", "Require", true)},
		{"a dotted name", policy("kyverno.io/v1", "ClusterPolicy", "", "pss.baseline", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, _ := validator.Validate(context.Background(), field.NewPath("spec", "template"), s, tc.obj, nil, math.MaxInt64)
			crdRefuses := len(errs) > 0
			err := CheckPolicy(tc.obj)
			if (err != nil) != crdRefuses {
				t.Errorf("CheckPolicy: %v; the CRD's rules: %v", err, errs)
			}
			if want := refused(tc.name); crdRefuses != want {
				t.Errorf("the CRD's rules refuse it: %v (%v), want %v", crdRefuses, errs, want)
			}
		})
	}
}

// refused: the cases above that name a fault.
func refused(name string) bool {
	for _, fault := range []string{"no apiVersion", "not Kyverno's", "look-alike", "no kind", "no spec", "without a namespace", "of 64", "upper-case"} {
		if strings.Contains(name, fault) {
			return true
		}
	}
	return false
}
