package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Owner is the hub and the declaration a rendered object belongs to.
type Owner struct {
	// HubID is the hub's id, the value of the managed-by label.
	HubID string
	// Kind, Namespace and Name identify the declaration (Namespace is empty for FleetPolicy).
	Kind, Namespace, Name string
}

// FleetPolicyOwner is the owner of what a FleetPolicy renders.
func FleetPolicyOwner(hubID, name string) Owner {
	return Owner{HubID: hubID, Kind: policyhubv1.KindFleetPolicy, Name: name}
}

// ApplicationPolicyOwner is the owner of what an ApplicationPolicy renders.
func ApplicationPolicyOwner(hubID, namespace, name string) Owner {
	return Owner{HubID: hubID, Kind: policyhubv1.KindApplicationPolicy, Namespace: namespace, Name: name}
}

// Source is the value of the source annotation: Kind/name or Kind/namespace/name.
func (o Owner) Source() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// ParseSource reads a source annotation's value back into the declaration it names (HubID is
// left empty).
func ParseSource(source string) (Owner, bool) {
	parts := strings.Split(source, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return Owner{Kind: parts[0], Name: parts[1]}, true
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return Owner{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, true
	}
	return Owner{}, false
}

// Labels are the ownership labels of an object the owner renders.
func (o Owner) Labels() map[string]string {
	labels := map[string]string{
		policyhubv1.LabelManagedBy:  o.HubID,
		policyhubv1.LabelSourceKind: o.Kind,
	}
	if o.Namespace != "" {
		labels[policyhubv1.LabelSourceNamespace] = o.Namespace
	}
	// A label value holds at most 63 characters; longer names are in the source annotation only.
	if len(validation.IsValidLabelValue(o.Name)) == 0 {
		labels[policyhubv1.LabelSourceName] = o.Name
	}
	return labels
}

// Validate checks that the owner can label objects.
func (o Owner) Validate() error {
	if errs := validation.IsValidLabelValue(o.HubID); o.HubID == "" || len(errs) > 0 {
		return fmt.Errorf("hub id %q is not a valid label value: %s", o.HubID, strings.Join(errs, "; "))
	}
	if o.Kind == "" || o.Name == "" {
		return fmt.Errorf("owner needs a kind and a name, got %q", o.Source())
	}
	return nil
}

// FleetPolicy renders a FleetPolicy's template for one cluster. mode is the mode in effect there
// (the spec's, or a cluster override's); nil keeps the template's own failure actions.
func FleetPolicy(hubID string, fp *policyhubv1.FleetPolicy, mode *policyhubv1.Mode) (*unstructured.Unstructured, error) {
	owner := FleetPolicyOwner(hubID, fp.Name)
	obj, err := Template(owner, fp.Spec.Template, fp.Name, mode)
	if err != nil {
		return nil, fmt.Errorf("render FleetPolicy %s: %w", fp.Name, err)
	}
	return obj, nil
}

// Template renders a policy template: metadata (name defaulting to defaultName), spec, mode
// override, ownership labels and annotations, content hash.
func Template(owner Owner, tmpl policyhubv1.PolicyTemplate, defaultName string, mode *policyhubv1.Mode) (*unstructured.Unstructured, error) {
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	if tmpl.APIVersion == "" || tmpl.Kind == "" {
		return nil, fmt.Errorf("template needs apiVersion and kind")
	}
	spec := map[string]any{}
	if tmpl.Spec != nil && len(tmpl.Spec.Raw) > 0 {
		// apimachinery's decoder keeps integers int64, as objects read from the API have them.
		if err := utiljson.Unmarshal(tmpl.Spec.Raw, &spec); err != nil {
			return nil, fmt.Errorf("template spec: %w", err)
		}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tmpl.APIVersion,
		"kind":       tmpl.Kind,
		"spec":       spec,
	}}
	name := tmpl.Metadata.Name
	if name == "" {
		name = defaultName
	}
	obj.SetName(name)
	obj.SetNamespace(tmpl.Metadata.Namespace)

	// An admission policy's mode is its binding's (AdmissionBinding); a Gatekeeper template has
	// none (its Constraints do), so a rollout's or an override's mode leaves it as written.
	if mode != nil && !IsAdmissionPolicy(obj.GroupVersionKind()) && !IsGatekeeperTemplate(obj.GroupVersionKind()) {
		if err := SetMode(obj, *mode); err != nil {
			return nil, err
		}
	}
	if err := ExemptHub(obj); err != nil {
		return nil, err
	}
	if err := stamp(owner, obj, tmpl.Metadata.Labels, tmpl.Metadata.Annotations); err != nil {
		return nil, err
	}
	return obj, nil
}

// stamp finishes a rendered object: its labels and annotations are the given ones plus the owner's
// labels and source annotation, then the content-hash annotation over the result.
func stamp(owner Owner, obj *unstructured.Unstructured, labels, annotations map[string]string) error {
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// Ownership labels win over the template's: an object must never look owned by another hub.
	maps.Copy(labels, owner.Labels())
	obj.SetLabels(labels)

	annotations = maps.Clone(annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, policyhubv1.AnnotationContentHash)
	annotations[policyhubv1.AnnotationSource] = owner.Source()
	obj.SetAnnotations(annotations)

	hash, err := ContentHash(obj)
	if err != nil {
		return err
	}
	annotations[policyhubv1.AnnotationContentHash] = hash
	obj.SetAnnotations(annotations)
	return nil
}

// ContentHash is the sha256 of the object's JSON without its content-hash annotation. JSON
// encoding sorts map keys, so equal content always hashes the same.
func ContentHash(obj *unstructured.Unstructured) (string, error) {
	c := obj.DeepCopy()
	annotations := c.GetAnnotations()
	delete(annotations, policyhubv1.AnnotationContentHash)
	c.SetAnnotations(annotations)
	data, err := json.Marshal(c.Object)
	if err != nil {
		return "", fmt.Errorf("content hash: %w", err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// TemplateRevision names a version of a policy template: the first 10 hex digits of the
// sha256 of its JSON (map keys sorted, so equal templates name the same).
func TemplateRevision(tmpl policyhubv1.PolicyTemplate) (string, error) {
	data, err := json.Marshal(tmpl)
	if err != nil {
		return "", fmt.Errorf("template revision: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:10], nil
}

// Groups of Kyverno's two policy generations.
const (
	kyvernoGroup  = "kyverno.io"
	policiesGroup = "policies.kyverno.io"
)

// SetMode rewrites the object's failure actions to mode, in every field its kind decides them by:
//   - kyverno.io ClusterPolicy and Policy: every validate rule's validate.failureAction, every
//     verifyImages entry's failureAction, and the deprecated policy-wide
//     spec.validationFailureAction when the template sets it. Kyverno lets per-namespace
//     overrides (a rule's validate.failureActionOverrides, the deprecated policy-wide
//     spec.validationFailureActionOverrides) win over those, so in Audit mode every override that
//     is not Audit is removed (the field too when none is left): an Audit policy enforces in no
//     namespace. In Enforce mode the overrides are kept: an Enforce one repeats the mode, and an
//     Audit one is an exemption the template's author wrote (e.g. for kube-system), which only
//     relaxes; enforcing there too would override a choice made for those namespaces.
//   - policies.kyverno.io ValidatingPolicy, ImageValidatingPolicy and their Namespaced forms:
//     spec.validationActions, Deny for Enforce and Audit for Audit (a Warn the template asks for
//     is kept). Kyverno 1.19 gives these kinds no per-namespace or per-validation override.
//
// Kinds that validate nothing (mutating, generating, deleting policies, exceptions) have no mode:
// setting one is an error, not a silent no-op.
func SetMode(obj *unstructured.Unstructured, mode policyhubv1.Mode) error {
	if mode != policyhubv1.ModeAudit && mode != policyhubv1.ModeEnforce {
		return fmt.Errorf("mode %q: want Audit or Enforce", mode)
	}
	gvk := obj.GroupVersionKind()
	switch {
	case ruleFailureActions(gvk):
		return setRuleFailureActions(obj, mode)
	case validationActions(gvk):
		return setValidationActions(obj, mode)
	case IsGatekeeperConstraint(gvk):
		return setEnforcementAction(obj, mode)
	default:
		return fmt.Errorf("mode %s does not apply to %s %s: only validating kinds have a failure action", mode, gvk.GroupKind(), obj.GetName())
	}
}

// HasMode says whether policies of the kind have a failure action a mode rewrites (SetMode).
func HasMode(gvk schema.GroupVersionKind) bool {
	return ruleFailureActions(gvk) || validationActions(gvk) || IsGatekeeperConstraint(gvk)
}

func ruleFailureActions(gvk schema.GroupVersionKind) bool {
	return gvk.Group == kyvernoGroup && (gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy")
}

func validationActions(gvk schema.GroupVersionKind) bool {
	return gvk.Group == policiesGroup && slices.Contains([]string{
		"ValidatingPolicy", "NamespacedValidatingPolicy", "ImageValidatingPolicy", "NamespacedImageValidatingPolicy",
	}, gvk.Kind)
}

func setRuleFailureActions(obj *unstructured.Unstructured, mode policyhubv1.Mode) error {
	rules, _, err := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if err != nil {
		return fmt.Errorf("spec.rules: %w", err)
	}
	withAction := 0
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.rules[%d] is not an object", i)
		}
		if validate, ok := rule["validate"].(map[string]any); ok {
			validate["failureAction"] = string(mode)
			if mode == policyhubv1.ModeAudit {
				if err := dropEnforcingOverrides(validate, "failureActionOverrides"); err != nil {
					return fmt.Errorf("spec.rules[%d].validate.failureActionOverrides: %w", i, err)
				}
			}
			withAction++
		}
		if v, found := rule["verifyImages"]; found {
			entries, ok := v.([]any)
			if !ok {
				return fmt.Errorf("spec.rules[%d].verifyImages is not a list", i)
			}
			for j, e := range entries {
				entry, ok := e.(map[string]any)
				if !ok {
					return fmt.Errorf("spec.rules[%d].verifyImages[%d] is not an object", i, j)
				}
				entry["failureAction"] = string(mode)
			}
			if len(entries) > 0 {
				withAction++
			}
		}
	}
	if withAction == 0 {
		return fmt.Errorf("mode %s: %s %s has no validate or verifyImages rule to apply it to", mode, obj.GetKind(), obj.GetName())
	}
	if err := unstructured.SetNestedSlice(obj.Object, rules, "spec", "rules"); err != nil {
		return err
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	if _, found := spec["validationFailureAction"]; found {
		spec["validationFailureAction"] = string(mode)
	}
	if mode == policyhubv1.ModeAudit {
		if err := dropEnforcingOverrides(spec, "validationFailureActionOverrides"); err != nil {
			return fmt.Errorf("spec.validationFailureActionOverrides: %w", err)
		}
	}
	return nil
}

// dropEnforcingOverrides removes from the override list parent[field] every entry whose action
// is not Audit (Kyverno reads actions case-insensitively, and anything else it may come to
// accept is not known to only report), and the field when no entry is left.
func dropEnforcingOverrides(parent map[string]any, field string) error {
	v, found := parent[field]
	if !found {
		return nil
	}
	overrides, ok := v.([]any)
	if !ok && v != nil {
		return fmt.Errorf("not a list")
	}
	kept := make([]any, 0, len(overrides))
	for _, o := range overrides {
		if override, ok := o.(map[string]any); ok {
			if action, _ := override["action"].(string); strings.EqualFold(action, string(policyhubv1.ModeAudit)) {
				kept = append(kept, o)
			}
		}
	}
	if len(kept) == 0 {
		delete(parent, field)
	} else {
		parent[field] = kept
	}
	return nil
}
func setValidationActions(obj *unstructured.Unstructured, mode policyhubv1.Mode) error {
	current, _, err := unstructured.NestedStringSlice(obj.Object, "spec", "validationActions")
	if err != nil {
		return fmt.Errorf("spec.validationActions: %w", err)
	}
	actions := []any{"Audit"}
	if mode == policyhubv1.ModeEnforce {
		actions = []any{"Deny"}
	}
	if slices.Contains(current, "Warn") {
		actions = append(actions, "Warn")
	}
	return unstructured.SetNestedSlice(obj.Object, actions, "spec", "validationActions")
}
