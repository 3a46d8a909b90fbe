package v1alpha1

import (
	"context"
	"math"
	"slices"
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
		{"a PolicyException, an exception", policy("kyverno.io/v2", "PolicyException", "shop", "a", true)},
		{"a CEL PolicyException, an exception", policy("policies.kyverno.io/v1", "PolicyException", "shop", "a", true)},
		{"a GlobalContextEntry, not a policy kind", policy("kyverno.io/v2alpha1", "GlobalContextEntry", "", "a", true)},
		{"an UpdateRequest, not a policy kind", policy("kyverno.io/v2", "UpdateRequest", "kyverno", "a", true)},
		{"a made-up kind of policies.kyverno.io, not a policy kind", policy("policies.kyverno.io/v1", "ValidatingPolicyBinding", "", "a", true)},
		{"a MutatingPolicy (allowed by kind, judged by spec.allow)", policy("policies.kyverno.io/v1", "MutatingPolicy", "", "a", true)},
		{"a ClusterCleanupPolicy", policy("kyverno.io/v2", "ClusterCleanupPolicy", "", "a", true)},
		{"a NamespacedDeletingPolicy in a namespace", policy("policies.kyverno.io/v1", "NamespacedDeletingPolicy", "shop", "a", true)},
		{"a Policy in the hub's namespace", policy("kyverno.io/v1", "Policy", SyncLeaseNamespace, "a", true)},
		{"a NamespacedValidatingPolicy without a namespace", policy("policies.kyverno.io/v1", "NamespacedValidatingPolicy", "", "a", true)},
		{"a name of 63", policy("kyverno.io/v1", "ClusterPolicy", "", strings.Repeat("a", 63), true)},
		{"a name of 64", policy("kyverno.io/v1", "ClusterPolicy", "", strings.Repeat("a", 64), true)},
		{"an upper-case name", policy("kyverno.io/v1", "ClusterPolicy", "", "Require", true)},
		{"a dotted name", policy("kyverno.io/v1", "ClusterPolicy", "", "pss.baseline", true)},
		{"a shadow's name", policy("kyverno.io/v1", "ClusterPolicy", "", ShadowName("a"), true)},
		{"a ValidatingAdmissionPolicy", policy("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", "require-team", true)},
		{"a ValidatingAdmissionPolicyBinding, not a policy kind", policy("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "", "a", true)},
		{"a ValidatingWebhookConfiguration, not a policy kind", policy("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "a", true)},
		{"a look-alike admission group", policy("admissionregistration.k8s.io.evil/v1", "ValidatingAdmissionPolicy", "", "a", true)},
		{"a Gatekeeper ConstraintTemplate", policy("templates.gatekeeper.sh/v1", "ConstraintTemplate", "", "k8srequiredlabels", true)},
		{"a Gatekeeper Constraint of any kind", policy("constraints.gatekeeper.sh/v1beta1", "K8sRequiredLabels", "", "must-have-team", true)},
		{"a Gatekeeper Constraint of a kind named Policy (no namespace)", policy("constraints.gatekeeper.sh/v1beta1", "Policy", "", "a", true)},
		{"a Gatekeeper Constraint named as a Namespaced kind, cluster-wide", policy("constraints.gatekeeper.sh/v1beta1", "NamespacedLimits", "", "a", true)},
		{"a Gatekeeper Constraint in a namespace, cluster-scoped", policy("constraints.gatekeeper.sh/v1beta1", "K8sRequiredLabels", "shop", "a", true)},
		{"a ConstraintTemplate in a namespace, cluster-scoped", policy("templates.gatekeeper.sh/v1", "ConstraintTemplate", "shop", "a", true)},
		{"a v1beta1 ConstraintTemplate, not a shipped version", policy("templates.gatekeeper.sh/v1beta1", "ConstraintTemplate", "", "a", true)},
		{"a v1alpha1 Constraint, not a shipped version", policy("constraints.gatekeeper.sh/v1alpha1", "K8sRequiredLabels", "", "a", true)},
		{"another kind of templates.gatekeeper.sh, not a policy kind", policy("templates.gatekeeper.sh/v1", "Template", "", "a", true)},
		{"an Assign of mutations.gatekeeper.sh, not Kyverno's", policy("mutations.gatekeeper.sh/v1", "Assign", "", "a", true)},
		{"a Provider of externaldata.gatekeeper.sh, not Kyverno's", policy("externaldata.gatekeeper.sh/v1beta1", "Provider", "", "a", true)},
		{"a look-alike Gatekeeper group", policy("constraints.gatekeeper.sh.evil/v1beta1", "K8sRequiredLabels", "", "a", true)},
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
	for _, fault := range []string{"no apiVersion", "not Kyverno's", "look-alike", "no kind", "no spec", "without a namespace", "of 64", "upper-case",
		"an exception", "not a policy kind", "the hub's namespace", "shadow's name", "cluster-scoped", "not a shipped version"} {
		if strings.Contains(name, fault) {
			return true
		}
	}
	return false
}

// A declaration ships what validates; everything else only when its spec.allow says so, and the
// refusal names the rule or the kind.
func TestCheckAllowed(t *testing.T) {
	clusterPolicy := func(rules ...map[string]any) map[string]any {
		list := make([]any, 0, len(rules))
		for _, r := range rules {
			list = append(list, r)
		}
		return map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
			"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"rules": list}}
	}
	rule := func(name, typ string) map[string]any {
		return map[string]any{"name": name, typ: map[string]any{}}
	}
	kind := func(apiVersion, kind, namespace string) map[string]any {
		meta := map[string]any{"name": "p"}
		if namespace != "" {
			meta["namespace"] = namespace
		}
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta, "spec": map[string]any{}}
	}
	for _, tc := range []struct {
		name   string
		obj    map[string]any
		allow  []PolicyCapability
		needs  []PolicyCapability
		refuse []string // each in the error; none: allowed
	}{
		{name: "validate rules", obj: clusterPolicy(rule("a", "validate"), rule("b", "validate"))},
		{name: "no rules", obj: clusterPolicy()},
		{name: "a ValidatingPolicy", obj: kind("policies.kyverno.io/v1", "ValidatingPolicy", "")},
		{name: "a mutate rule", obj: clusterPolicy(rule("a", "validate"), rule("add-init", "mutate")),
			needs: []PolicyCapability{CapabilityMutate}, refuse: []string{"spec.rules[1] (add-init) mutate needs Mutate", "spec.allow"}},
		{name: "a mutate rule, allowed", obj: clusterPolicy(rule("add-init", "mutate")), allow: []PolicyCapability{CapabilityMutate},
			needs: []PolicyCapability{CapabilityMutate}},
		{name: "generate and verifyImages, Generate allowed", obj: clusterPolicy(rule("g", "generate"), rule("v", "verifyImages")),
			allow: []PolicyCapability{CapabilityGenerate}, needs: []PolicyCapability{CapabilityGenerate, CapabilityVerifyImages},
			refuse: []string{"spec.rules[1] (v) verifyImages needs VerifyImages"}},
		{name: "a rule of no type", obj: clusterPolicy(map[string]any{"name": "x", "exclude": map[string]any{}}),
			refuse: []string{"spec.rules[0]", "none of validate, mutate, generate, verifyImages"}},
		{name: "rules not a list", obj: map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "p"},
			"spec": map[string]any{"rules": "mutate"}}, refuse: []string{"spec.rules: a list"}},
		{name: "a MutatingPolicy", obj: kind("policies.kyverno.io/v1", "MutatingPolicy", ""),
			needs: []PolicyCapability{CapabilityMutate}, refuse: []string{"kind MutatingPolicy needs Mutate"}},
		{name: "a MutatingAdmissionPolicy", obj: kind("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy", ""),
			needs: []PolicyCapability{CapabilityMutate}, refuse: []string{"kind MutatingAdmissionPolicy needs Mutate"}},
		{name: "a MutatingAdmissionPolicy, allowed", obj: kind("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy", ""),
			allow: []PolicyCapability{CapabilityMutate}, needs: []PolicyCapability{CapabilityMutate}},
		{name: "a MutatingAdmissionPolicy with parameters", obj: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
			"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"paramKind": map[string]any{"kind": "ConfigMap"}}},
			allow: []PolicyCapability{CapabilityMutate}, needs: []PolicyCapability{CapabilityMutate}, refuse: []string{"spec.paramKind", "MutatingAdmissionPolicy"}},
		{name: "a NamespacedGeneratingPolicy, allowed", obj: kind("policies.kyverno.io/v1", "NamespacedGeneratingPolicy", "shop"),
			allow: []PolicyCapability{CapabilityGenerate}, needs: []PolicyCapability{CapabilityGenerate}},
		{name: "a ClusterCleanupPolicy", obj: kind("kyverno.io/v2", "ClusterCleanupPolicy", ""),
			allow: []PolicyCapability{CapabilityMutate, CapabilityGenerate, CapabilityVerifyImages},
			needs: []PolicyCapability{CapabilityCleanup}, refuse: []string{"needs Cleanup"}},
		{name: "an ImageValidatingPolicy", obj: kind("policies.kyverno.io/v1", "ImageValidatingPolicy", ""),
			needs: []PolicyCapability{CapabilityVerifyImages}, refuse: []string{"needs VerifyImages"}},
		{name: "a PolicyException, whatever is allowed", obj: kind("kyverno.io/v2", "PolicyException", "shop"),
			allow:  []PolicyCapability{CapabilityMutate, CapabilityGenerate, CapabilityCleanup, CapabilityVerifyImages},
			refuse: []string{"kind PolicyException", "FleetPolicyExceptions"}},
		{name: "a CEL PolicyException", obj: kind("policies.kyverno.io/v1", "PolicyException", "shop"), refuse: []string{"kind PolicyException"}},
		{name: "a GlobalContextEntry", obj: kind("kyverno.io/v2alpha1", "GlobalContextEntry", ""), refuse: []string{"kind GlobalContextEntry of kyverno.io: not a policy kind"}},
		{name: "a Policy in policyhub-system", obj: kind("kyverno.io/v1", "Policy", SyncLeaseNamespace), refuse: []string{"metadata.namespace may not be policyhub-system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAllowed(tc.obj, tc.allow)
			switch {
			case len(tc.refuse) == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case len(tc.refuse) > 0 && err == nil:
				t.Fatalf("allowed, want refused naming %q", tc.refuse)
			}
			for _, want := range tc.refuse {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if CheckPolicy(tc.obj) != nil {
				return // not a policy the hub ships at all: no capabilities to speak of
			}
			got, err := PolicyCapabilities(tc.obj)
			if err != nil {
				if len(tc.refuse) == 0 {
					t.Fatal(err)
				}
				return
			}
			if !slices.Equal(got, tc.needs) {
				t.Errorf("capabilities %v, want %v", got, tc.needs)
			}
		})
	}
}
