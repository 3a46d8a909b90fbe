package tocel

import (
	"fmt"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Result is a conversion: the ValidatingPolicy (nil when anything was refused) and the report.
type Result struct {
	Policy *unstructured.Unstructured
	Report Report
}

// Output API.
const (
	APIVersion          = "policies.kyverno.io/v1"
	KindCluster         = "ValidatingPolicy"
	KindNamespaced      = "NamespacedValidatingPolicy"
	ConvertedAnnotation = "policyhub.io/converted-from"
)

// specKeys are the legacy spec fields the converter reads; others are refused.
var specKeys = map[string]bool{
	"rules": true, "validationFailureAction": true, "background": true, "failurePolicy": true,
	"admission": true, "emitWarning": true, "webhookTimeoutSeconds": true, "schemaValidation": true,
}

// ConvertYAML converts one legacy policy given as YAML or JSON.
func ConvertYAML(data []byte) (Result, error) {
	obj, err := decodeYAML(data)
	if err != nil {
		return Result{}, fmt.Errorf("tocel: read the legacy policy: %w", err)
	}
	return Convert(&unstructured.Unstructured{Object: obj})
}

// decodeYAML reads one YAML or JSON document as Kubernetes does: integers as int64, other
// numbers as float64 (Kyverno's pattern rules depend on the difference).
func decodeYAML(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := json.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Convert converts a legacy kyverno.io/v1 ClusterPolicy or Policy. The error is for input that
// is not such a policy; what cannot be converted is refused in the Result's Report.
func Convert(legacy *unstructured.Unstructured) (Result, error) {
	if legacy == nil {
		return Result{}, fmt.Errorf("tocel: no policy")
	}
	kind := legacy.GetKind()
	if legacy.GetAPIVersion() != "kyverno.io/v1" || (kind != "ClusterPolicy" && kind != "Policy") {
		return Result{}, fmt.Errorf("tocel: %s %s is not a kyverno.io/v1 ClusterPolicy or Policy", legacy.GetAPIVersion(), kind)
	}
	rep := Report{Policy: kind + "/" + legacy.GetName()}
	if legacy.GetNamespace() != "" {
		rep.Policy = kind + "/" + legacy.GetNamespace() + "/" + legacy.GetName()
	}
	spec, _ := legacy.Object["spec"].(map[string]any)
	keys := sortedKeys(spec)
	for _, k := range keys {
		if !specKeys[k] {
			rep.Refusals = append(rep.Refusals, "spec."+k+" is not converted")
		}
	}
	rules, _ := spec["rules"].([]any)
	if len(rules) == 0 {
		rep.Refusals = append(rep.Refusals, "spec.rules is empty")
	}
	specAction, _ := spec["validationFailureAction"].(string)

	var converted []convertedRule
	for i, r := range rules {
		rm, _ := r.(map[string]any)
		cr, rr, err := convertRule(rm, specAction)
		if rr.Name == "" {
			rr.Name = fmt.Sprintf("#%d", i)
		}
		if err != nil {
			rr.Refusals = append(rr.Refusals, reason(err))
		}
		rep.Rules = append(rep.Rules, rr)
		converted = append(converted, cr)
	}
	if rep.Refused() {
		return Result{Report: rep}, nil
	}
	first := converted[0]
	for i, cr := range converted[1:] {
		if !reflect.DeepEqual(cr.match, first.match) || !reflect.DeepEqual(cr.operations, first.operations) ||
			cr.background != first.background || cr.action != first.action {
			rep.Refusals = append(rep.Refusals, fmt.Sprintf("rule %s differs from rule %s in match, preconditions or action; one ValidatingPolicy has one match: split the policy", rep.Rules[i+1].Name, rep.Rules[0].Name))
			return Result{Report: rep}, nil
		}
	}

	out, err := assemble(legacy, spec, converted, &rep)
	if err != nil {
		return Result{}, fmt.Errorf("tocel: %s: %w", rep.Policy, err)
	}
	if rep.Refused() {
		return Result{Report: rep}, nil
	}
	return Result{Policy: out, Report: rep}, nil
}

// assemble writes the ValidatingPolicy for rules that share one match.
func assemble(legacy *unstructured.Unstructured, spec map[string]any, rules []convertedRule, rep *Report) (*unstructured.Unstructured, error) {
	first := rules[0]
	actions := []any{"Audit"}
	if first.action == "Enforce" {
		actions = []any{"Deny"}
	}
	if warn, _ := spec["emitWarning"].(bool); warn {
		if first.action == "Enforce" {
			rep.Refusals = append(rep.Refusals, "spec.emitWarning with Enforce is not converted (Deny and Warn may not be used together)")
			return nil, nil
		}
		actions = append(actions, "Warn")
	}
	background := true
	if b, ok := spec["background"].(bool); ok {
		background = b
	}
	evaluation := map[string]any{"background": map[string]any{"enabled": background && first.background}}
	if a, ok := spec["admission"].(bool); ok && !a {
		evaluation["admission"] = map[string]any{"enabled": false}
	}

	constraints := map[string]any{"resourceRules": withOperations(first.match.rules, first.operations)}
	if len(first.match.excluded) > 0 {
		constraints["excludeResourceRules"] = withOperations(first.match.excluded, first.operations)
	}
	if ns := namespaceSelector(first.match); ns != nil {
		constraints["namespaceSelector"] = ns
	}
	if first.match.objSelect != nil {
		constraints["objectSelector"] = first.match.objSelect
	}

	var validations []any
	for _, r := range rules {
		validations = append(validations, r.validation)
	}
	outSpec := map[string]any{
		"validationActions": actions,
		"evaluation":        evaluation,
		"matchConstraints":  constraints,
		"validations":       validations,
	}
	if len(first.match.conditions) > 0 {
		outSpec["matchConditions"] = first.match.conditions
	}
	if fp, ok := spec["failurePolicy"].(string); ok {
		outSpec["failurePolicy"] = fp
	}
	if t, ok := spec["webhookTimeoutSeconds"]; ok {
		outSpec["webhookConfiguration"] = map[string]any{"timeoutSeconds": t}
	}
	annotations := map[string]any{}
	for k, v := range legacy.GetAnnotations() {
		if k != autogenAnnotation && k != "kubectl.kubernetes.io/last-applied-configuration" {
			annotations[k] = v
		}
	}
	if first.match.podsOnly && len(first.match.excluded) == 0 && first.match.objSelect == nil {
		legacyAnn := map[string]any{}
		for k, v := range legacy.GetAnnotations() {
			legacyAnn[k] = v
		}
		controllers, notes := autogenControllers(legacyAnn)
		if first.match.noAutogen {
			controllers, notes = []string{}, nil
		}
		rep.Notes = append(rep.Notes, notes...)
		outSpec["autogen"] = map[string]any{"podControllers": map[string]any{"controllers": toAny(controllers)}}
	}
	kind := KindCluster
	meta := map[string]any{"name": legacy.GetName()}
	if legacy.GetKind() == "Policy" {
		kind = KindNamespaced
		if ns := legacy.GetNamespace(); ns != "" {
			meta["namespace"] = ns
		}
	}
	annotations[ConvertedAnnotation] = "kyverno.io/v1 " + rep.Policy
	meta["annotations"] = annotations
	if labels := legacy.GetLabels(); len(labels) > 0 {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		meta["labels"] = l
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": kind, "metadata": meta, "spec": outSpec,
	}}, nil
}

// namespaceSelector joins the match's namespaceSelector with the namespaces filters.
func namespaceSelector(m match) map[string]any {
	if m.nsSelector == nil && len(m.nsExprs) == 0 {
		return nil
	}
	sel := map[string]any{}
	for k, v := range m.nsSelector {
		sel[k] = v
	}
	if len(m.nsExprs) > 0 {
		exprs, _ := sel["matchExpressions"].([]any)
		sel["matchExpressions"] = append(append([]any(nil), exprs...), m.nsExprs...)
	}
	return sel
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// withOperations copies resource rules, each with the operations set.
func withOperations(rules []any, operations []string) []any {
	var out []any
	for _, r := range rules {
		rr := map[string]any{}
		for k, v := range r.(map[string]any) {
			rr[k] = v
		}
		rr["operations"] = toAny(operations)
		out = append(out, rr)
	}
	return out
}
