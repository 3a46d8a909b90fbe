package render

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestWithExceptionsInForceMarksNamespacedCELPolicies(t *testing.T) {
	policy := func(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": map[string]any{}}}
		obj.SetNamespace(namespace)
		obj.SetName(name)
		if err := stamp(FleetPolicyOwner("hub", name), obj, nil, nil); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	nvpol := policy("policies.kyverno.io/v1", "NamespacedValidatingPolicy", "shop", "limits")
	vpol := policy("policies.kyverno.io/v1", "ValidatingPolicy", "", "no-latest")
	shared := []*unstructured.Unstructured{nvpol, vpol}
	t1 := &Targets{Objects: map[string][]*unstructured.Unstructured{"a": shared, "b": shared, "c": shared}}
	inForce := map[string]map[string][]string{
		"a": {"NamespacedValidatingPolicy/shop/limits": {"fpex-x", "fpex-y"}, "ValidatingPolicy/no-latest": {"fpex-z"}},
		"b": {"NamespacedValidatingPolicy/shop/limits": {"fpex-y", "fpex-x"}},
		"d": {"NamespacedValidatingPolicy/shop/limits": {"fpex-x"}}, // not a target: ignored
	}
	if err := WithExceptionsInForce(t1, inForce); err != nil {
		t.Fatal(err)
	}
	a, b, c := t1.Objects["a"], t1.Objects["b"], t1.Objects["c"]
	if &c[0] != &shared[0] || c[0].GetAnnotations()[AnnotationExceptionsInForce] != "" {
		t.Errorf("cluster c, without exceptions, does not keep the shared objects unmarked")
	}
	if nvpol.GetAnnotations()[AnnotationExceptionsInForce] != "" {
		t.Errorf("the shared object was changed")
	}
	mark := a[0].GetAnnotations()[AnnotationExceptionsInForce]
	if mark == "" || b[0].GetAnnotations()[AnnotationExceptionsInForce] != mark {
		t.Errorf("marks a=%q b=%q: want one mark for the same exceptions in any order", mark, b[0].GetAnnotations()[AnnotationExceptionsInForce])
	}
	if a[0].GetAnnotations()[policyhubv1.AnnotationContentHash] == nvpol.GetAnnotations()[policyhubv1.AnnotationContentHash] {
		t.Errorf("the marked copy keeps the content hash of the unmarked policy: the workers would not write it")
	}
	if a[1] != vpol {
		t.Errorf("a cluster-scoped ValidatingPolicy (whose exception events Kyverno handles) was marked")
	}
}
