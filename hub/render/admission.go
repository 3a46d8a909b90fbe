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

// IsAdmissionPolicy says whether objects of the kind are Kubernetes ValidatingAdmissionPolicies.
func IsAdmissionPolicy(gvk schema.GroupVersionKind) bool {
	return gvk.Group == policyhubv1.AdmissionGroup && gvk.Kind == "ValidatingAdmissionPolicy"
}

// AdmissionBinding is the ValidatingAdmissionPolicyBinding policyhub writes for a rendered
// ValidatingAdmissionPolicy: named as the policy, binding it with the mode's validation actions
// (Enforce, or no mode: Deny; Audit: Audit and Warn), never in the hub's own namespace (a
// binding's namespaceSelector reads a Namespace's own labels, so the namespace itself is left
// alone too; leaving resourceRules out constrains nothing else); owned and stamped as the policy.
func AdmissionBinding(policy *unstructured.Unstructured, mode *policyhubv1.Mode) (*unstructured.Unstructured, error) {
	owner, ok := ParseSource(policy.GetAnnotations()[policyhubv1.AnnotationSource])
	if !ok {
		return nil, fmt.Errorf("binding of %s: not a rendered policy (no source annotation)", policy.GetName())
	}
	owner.HubID = policy.GetLabels()[policyhubv1.LabelManagedBy]
	actions := []any{"Deny"}
	if mode != nil && *mode == policyhubv1.ModeAudit {
		actions = []any{"Audit", "Warn"}
	}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policy.GetAPIVersion(),
		"kind":       "ValidatingAdmissionPolicyBinding",
		"spec": map[string]any{
			"policyName":        policy.GetName(),
			"validationActions": actions,
			"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{policyhubv1.SyncLeaseNamespace}},
			}}},
		},
	}}
	binding.SetName(policy.GetName())
	if err := stamp(owner, binding, nil, nil); err != nil {
		return nil, fmt.Errorf("binding of %s: %w", policy.GetName(), err)
	}
	return binding, nil
}

// withCompanions is a rendered policy and what the hub writes beside it: a
// ValidatingAdmissionPolicy's binding in mode.
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
