package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Kubernetes' own admission policies: a ValidatingAdmissionPolicy does nothing without a
// binding, and the binding is where policyhub's decisions go (the mode, the hub's own namespace
// left alone), so the hub writes it beside the policy, as one unit.

// admissionBindingKinds are Kubernetes' admission policy kinds and the kind of the binding
// policyhub writes beside each.
var admissionBindingKinds = map[string]string{
	"ValidatingAdmissionPolicy": "ValidatingAdmissionPolicyBinding",
	"MutatingAdmissionPolicy":   "MutatingAdmissionPolicyBinding",
}

// IsAdmissionPolicy says whether objects of the kind are Kubernetes admission policies
// (ValidatingAdmissionPolicy, MutatingAdmissionPolicy): the hub writes their bindings.
func IsAdmissionPolicy(gvk schema.GroupVersionKind) bool {
	return gvk.Group == policyhubv1.AdmissionGroup && admissionBindingKinds[gvk.Kind] != ""
}

// AdmissionBinding is the binding policyhub writes for a rendered admission policy: for a
// ValidatingAdmissionPolicy a ValidatingAdmissionPolicyBinding with the mode's validation actions
// (Enforce, or no mode: Deny; Audit: Audit and Warn), for a MutatingAdmissionPolicy a
// MutatingAdmissionPolicyBinding (a mutation has no mode); named as the policy, never in the
// hub's own namespace (a
// binding's namespaceSelector reads a Namespace's own labels, so the namespace itself is left
// alone too; leaving resourceRules out constrains nothing else); owned and stamped as the policy.
func AdmissionBinding(policy *unstructured.Unstructured, mode *policyhubv1.Mode) (*unstructured.Unstructured, error) {
	owner, ok := ParseSource(policy.GetAnnotations()[policyhubv1.AnnotationSource])
	if !ok {
		return nil, fmt.Errorf("binding of %s: not a rendered policy (no source annotation)", policy.GetName())
	}
	owner.HubID = policy.GetLabels()[policyhubv1.LabelManagedBy]
	kind := admissionBindingKinds[policy.GetKind()]
	if kind == "" {
		return nil, fmt.Errorf("binding of %s: %s is not a Kubernetes admission policy", policy.GetName(), policy.GetKind())
	}
	spec := map[string]any{
		"policyName": policy.GetName(),
		"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{policyhubv1.SyncLeaseNamespace}},
		}}},
	}
	if kind == "ValidatingAdmissionPolicyBinding" {
		actions := []any{"Deny"}
		if mode != nil && *mode == policyhubv1.ModeAudit {
			actions = []any{"Audit", "Warn"}
		}
		spec["validationActions"] = actions
	}
	binding := &unstructured.Unstructured{Object: map[string]any{"apiVersion": policy.GetAPIVersion(), "kind": kind, "spec": spec}}
	binding.SetName(policy.GetName())
	if err := stamp(owner, binding, nil, nil); err != nil {
		return nil, fmt.Errorf("binding of %s: %w", policy.GetName(), err)
	}
	return binding, nil
}

// withCompanions is a rendered policy and what the hub writes beside it: an admission policy's
// binding in mode.
func withCompanions(obj *unstructured.Unstructured, mode *policyhubv1.Mode) ([]*unstructured.Unstructured, error) {
	if !IsAdmissionPolicy(obj.GroupVersionKind()) {
		return []*unstructured.Unstructured{obj}, nil
	}
	binding, err := AdmissionBinding(obj, mode)
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{obj, binding}, nil
}
