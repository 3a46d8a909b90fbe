package render

import (
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Shadow renders the report-only shadow of a rendered candidate policy: the same rules under
// the shadow's name (policyhubv1.ShadowName), labelled a shadow and, when live is given, naming
// the live policy it is compared with in the cluster. It evaluates where the candidate does, and
// can never deny a request:
//   - a candidate that scans in background (the default) is evaluated in background only:
//     Kyverno's admission evaluation of the shadow is off (policies.kyverno.io kinds:
//     spec.evaluation.admission.enabled false; kyverno.io kinds: spec.admission false);
//   - a candidate that is evaluated at admission only (background off: e.g. a legacy rule on
//     request.operation, converted) is evaluated at admission, its only action Audit and its
//     webhook's failure policy Ignore, so that neither a failing rule nor an unreachable Kyverno
//     refuses a request because of it;
//   - either way every failure action is Audit (no enforcing override kept).
//
// Any other kind than ValidatingPolicy, NamespacedValidatingPolicy, ClusterPolicy and Policy,
// or a legacy policy with a rule that does more than validate, is refused: a shadow only judges.
func Shadow(candidate, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	owner, ok := ParseSource(candidate.GetAnnotations()[policyhubv1.AnnotationSource])
	if !ok {
		return nil, fmt.Errorf("shadow of %s %s: not a rendered policy (no source annotation)", candidate.GetKind(), candidate.GetName())
	}
	owner.HubID = candidate.GetLabels()[policyhubv1.LabelManagedBy]
	shadow := candidate.DeepCopy()
	gvk := shadow.GroupVersionKind()
	set := func(value any, path ...string) error {
		if err := unstructured.SetNestedField(shadow.Object, value, path...); err != nil {
			return fmt.Errorf("shadow of %s: %s: %w", candidate.GetName(), strings.Join(path, "."), err)
		}
		return nil
	}
	switch {
	case gvk.Group == policiesGroup && (gvk.Kind == "ValidatingPolicy" || gvk.Kind == "NamespacedValidatingPolicy"):
		background, found, _ := unstructured.NestedBool(shadow.Object, "spec", "evaluation", "background", "enabled")
		background = background || !found
		if err := unstructured.SetNestedSlice(shadow.Object, []any{"Audit"}, "spec", "validationActions"); err != nil {
			return nil, fmt.Errorf("shadow of %s: %w", candidate.GetName(), err)
		}
		if err := set(!background, "spec", "evaluation", "admission", "enabled"); err != nil {
			return nil, err
		}
		if err := set("Ignore", "spec", "failurePolicy"); err != nil {
			return nil, err
		}
	case ruleFailureActions(gvk):
		if err := onlyValidates(shadow); err != nil {
			return nil, fmt.Errorf("shadow of %s %s: %w", gvk.Kind, candidate.GetName(), err)
		}
		if err := SetMode(shadow, policyhubv1.ModeAudit); err != nil {
			return nil, fmt.Errorf("shadow of %s: %w", candidate.GetName(), err)
		}
		background, found, _ := unstructured.NestedBool(shadow.Object, "spec", "background")
		background = background || !found
		if err := set(!background, "spec", "admission"); err != nil {
			return nil, err
		}
		if err := set("Ignore", "spec", "failurePolicy"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("shadow of %s %s: only ValidatingPolicy, NamespacedValidatingPolicy, ClusterPolicy and Policy can be previewed", gvk.GroupKind(), candidate.GetName())
	}
	shadow.SetName(policyhubv1.ShadowName(candidate.GetName()))
	labels := maps.Clone(shadow.GetLabels())
	labels[policyhubv1.LabelShadow] = policyhubv1.ShadowValue
	annotations := maps.Clone(shadow.GetAnnotations())
	delete(annotations, policyhubv1.AnnotationShadowOf)
	if live != nil {
		annotations[policyhubv1.AnnotationShadowOf] = policyhubv1.ShadowOfValue(live.GetKind(), live.GetNamespace(), live.GetName())
	}
	if err := stamp(owner, shadow, labels, annotations); err != nil {
		return nil, fmt.Errorf("shadow of %s: %w", candidate.GetName(), err)
	}
	return shadow, nil
}

// onlyValidates refuses a legacy policy with a rule that mutates, generates or verifies images:
// with admission off, such a rule would still act in background (generate) or be lost, and a
// shadow must change nothing.
func onlyValidates(obj *unstructured.Unstructured) error {
	rules, _, err := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if err != nil {
		return fmt.Errorf("spec.rules: %w", err)
	}
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		for _, field := range []string{"mutate", "generate", "verifyImages"} {
			if _, found := rule[field]; found {
				return fmt.Errorf("spec.rules[%d] has %s: only validate rules can be previewed", i, field)
			}
		}
	}
	return nil
}
