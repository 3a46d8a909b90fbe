package render

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Annotations on a rendered Kyverno PolicyException, for whoever meets it in a cluster: who owns
// it, why, where it is tracked, who asked and who approved, and when it ends.
const (
	AnnotationExceptionOwner       = "policyhub.io/exception-owner"
	AnnotationExceptionReason      = "policyhub.io/exception-reason"
	AnnotationExceptionTicket      = "policyhub.io/exception-ticket"
	AnnotationExceptionRequestedBy = "policyhub.io/exception-requested-by"
	AnnotationExceptionApprovedBy  = "policyhub.io/exception-approved-by"
	AnnotationExceptionExpiresAt   = "policyhub.io/exception-expires-at"
)

// ExceptedPolicy is the Kyverno policy an exception exempts from, as its declaration renders it
// in the clusters.
type ExceptedPolicy struct {
	APIVersion, Kind, Namespace, Name string
}

// Ref is the policy as kind/name or kind/namespace/name.
func (p ExceptedPolicy) Ref() string {
	if p.Namespace == "" {
		return p.Kind + "/" + p.Name
	}
	return p.Kind + "/" + p.Namespace + "/" + p.Name
}

// FleetPolicyExceptionOwner is the owner of what a FleetPolicyException renders.
func FleetPolicyExceptionOwner(hubID, namespace, name string) Owner {
	return Owner{HubID: hubID, Kind: policyhubv1.KindFleetPolicyException, Namespace: namespace, Name: name}
}

// ExceptionTargets renders an exception for the clusters it applies in: the same Kyverno
// PolicyException in each of them, in the namespace each cluster's Kyverno reads exceptions from
// (namespaceOf). Nothing is rendered for no cluster (an exception not Active is pruned everywhere).
func ExceptionTargets(hubID string, ex *policyhubv1.FleetPolicyException, policy ExceptedPolicy, namespaceOf func(cluster string) string, clusters []string) (*Targets, error) {
	t := &Targets{
		Source:  FleetPolicyExceptionOwner(hubID, ex.Namespace, ex.Name).Source(),
		Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{},
	}
	// Rendered once per namespace, and shared by the clusters of that namespace.
	rendered := map[string][]*unstructured.Unstructured{}
	for _, c := range clusters {
		ns := namespaceOf(c)
		objs, ok := rendered[ns]
		if !ok {
			obj, err := Exception(hubID, ex, policy, ns)
			if err != nil {
				return nil, &InvalidError{Reason: "InvalidException", Err: err}
			}
			objs = []*unstructured.Unstructured{obj}
			rendered[ns] = objs
		}
		t.Objects[c] = objs
	}
	return t, nil
}

// Exception renders a FleetPolicyException as the PolicyException Kyverno reads for the policy's
// kind: kyverno.io/v2 for ClusterPolicy and Policy, policies.kyverno.io/v1 for the CEL kinds
// (which also carries expiresAt, a backstop: the hub removes it at the end date whatever Kyverno
// does with it).
func Exception(hubID string, ex *policyhubv1.FleetPolicyException, policy ExceptedPolicy, namespace string) (*unstructured.Unstructured, error) {
	owner := FleetPolicyExceptionOwner(hubID, ex.Namespace, ex.Name)
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(policy.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("the policy's apiVersion %q: %w", policy.APIVersion, err)
	}
	var obj *unstructured.Unstructured
	switch {
	case gv.Group == kyvernoGroup && (policy.Kind == "ClusterPolicy" || policy.Kind == "Policy"):
		obj, err = legacyException(ex, policy)
	case gv.Group == policiesGroup && policy.Kind != "PolicyException":
		obj, err = celException(ex, policy)
	default:
		return nil, fmt.Errorf("spec.target: %s %s is not a Kyverno policy an exception can exempt from (kyverno.io ClusterPolicy or Policy, or a policies.kyverno.io policy)", policy.APIVersion, policy.Kind)
	}
	if err != nil {
		return nil, err
	}
	obj.SetName(policyhubv1.ExceptionObjectName(ex.Namespace, ex.Name))
	obj.SetNamespace(namespace)
	annotations := map[string]string{
		AnnotationExceptionOwner:     ex.Spec.Owner,
		AnnotationExceptionReason:    ex.Spec.Reason,
		AnnotationExceptionTicket:    ex.Spec.Ticket,
		AnnotationExceptionExpiresAt: ex.Spec.ExpiresAt.UTC().Format(time.RFC3339),
	}
	if ex.Spec.RequestedBy != "" {
		annotations[AnnotationExceptionRequestedBy] = ex.Spec.RequestedBy
	}
	if a := ex.Status.Approval; a != nil {
		annotations[AnnotationExceptionApprovedBy] = a.By
	}
	if err := stamp(owner, obj, nil, annotations); err != nil {
		return nil, err
	}
	return obj, nil
}

// legacyException is a kyverno.io/v2 PolicyException. Kyverno generates a Pod rule's rules for Pod
// controllers under other names (autogen-<rule>, autogen-cronjob-<rule>) and matches exceptions
// by rule name, so those are exempted with the rule.
func legacyException(ex *policyhubv1.FleetPolicyException, policy ExceptedPolicy) (*unstructured.Unstructured, error) {
	if len(ex.Spec.Resources.MatchConditions) > 0 {
		return nil, fmt.Errorf("spec.resources.matchConditions: %s is a kyverno.io policy, whose exceptions have no CEL conditions; use namespaces, kinds, names or a selector", policy.Ref())
	}
	rules := []any{"*"}
	if len(ex.Spec.Target.Rules) > 0 {
		rules = nil
		for _, r := range ex.Spec.Target.Rules {
			rules = append(rules, r, "autogen-"+r, "autogen-cronjob-"+r)
		}
	}
	resources := map[string]any{}
	res := ex.Spec.Resources
	if len(res.Namespaces) > 0 {
		resources["namespaces"] = stringsToAny(res.Namespaces)
	}
	if len(res.Kinds) > 0 {
		resources["kinds"] = stringsToAny(res.Kinds)
	}
	if len(res.Names) > 0 {
		resources["names"] = stringsToAny(res.Names)
	}
	if s := res.Selector; s != nil {
		selector := map[string]any{}
		if len(s.MatchLabels) > 0 {
			labels := map[string]any{}
			for k, v := range s.MatchLabels {
				labels[k] = v
			}
			selector["matchLabels"] = labels
		}
		if len(s.MatchExpressions) > 0 {
			var exprs []any
			for _, e := range s.MatchExpressions {
				expr := map[string]any{"key": e.Key, "operator": string(e.Operator)}
				if len(e.Values) > 0 {
					expr["values"] = stringsToAny(e.Values)
				}
				exprs = append(exprs, expr)
			}
			selector["matchExpressions"] = exprs
		}
		resources["selector"] = selector
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kyverno.io/v2",
		"kind":       "PolicyException",
		"spec": map[string]any{
			"background": true,
			"exceptions": []any{map[string]any{
				"policyName": policyhubv1.PolicyRef(policy.Namespace, policy.Name),
				"ruleNames":  rules,
			}},
			"match": map[string]any{"any": []any{map[string]any{"resources": resources}}},
		},
	}}, nil
}

// celException is a policies.kyverno.io/v1 PolicyException: it exempts from the whole policy (the
// CEL kinds have no rule names), and the resources are CEL match conditions.
func celException(ex *policyhubv1.FleetPolicyException, policy ExceptedPolicy) (*unstructured.Unstructured, error) {
	if len(ex.Spec.Target.Rules) > 0 {
		return nil, fmt.Errorf("spec.target.rules: %s is a policies.kyverno.io policy, exempted from as a whole; remove the rules", policy.Ref())
	}
	if err := SandboxedConditions(ex.Spec.Resources); err != nil {
		return nil, err
	}
	conditions, err := exceptionConditions(ex.Spec.Resources)
	if err != nil {
		return nil, err
	}
	// Kyverno's own fields for who and why (its CRD suggests these keys).
	properties := map[string]any{"owner": ex.Spec.Owner, "ticket": ex.Spec.Ticket, "reason": ex.Spec.Reason}
	if a := ex.Status.Approval; a != nil {
		properties["approved-by"] = a.By
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policies.kyverno.io/v1",
		"kind":       "PolicyException",
		"spec": map[string]any{
			"policyRefs":      []any{map[string]any{"kind": policy.Kind, "name": policy.Name}},
			"matchConditions": conditions,
			"reportResult":    "skip",
			"expiresAt":       ex.Spec.ExpiresAt.UTC().Format(time.RFC3339),
			"properties":      properties,
		},
	}}, nil
}

// exceptionConditions are the CEL match conditions selecting the resources: one per field given
// (named policyhub-<field>), then the exception's own.
// Every term checks presence first (has()), so that a resource without a namespace or labels is
// simply not exempted.
func exceptionConditions(res policyhubv1.ExceptionResources) ([]any, error) {
	var conditions []any
	add := func(name, expression string) {
		conditions = append(conditions, map[string]any{"name": name, "expression": expression})
	}
	if len(res.Namespaces) > 0 {
		add("policyhub-namespaces", "has(object.metadata.namespace) && ("+nameMatches("object.metadata.namespace", res.Namespaces)+")")
	}
	if len(res.Kinds) > 0 {
		kinds := make([]string, 0, len(res.Kinds))
		for _, k := range res.Kinds {
			kinds = append(kinds, celString(k[strings.LastIndex(k, "/")+1:]))
		}
		add("policyhub-kinds", "object.kind in ["+strings.Join(kinds, ", ")+"]")
	}
	if len(res.Names) > 0 {
		add("policyhub-names", nameMatches("object.metadata.name", res.Names))
	}
	if s := res.Selector; s != nil {
		expr, err := selectorCEL(s)
		if err != nil {
			return nil, err
		}
		add("policyhub-selector", expr)
	}
	for _, c := range res.MatchConditions {
		add(c.Name, c.Expression)
	}
	return conditions, nil
}

// nameMatches is a CEL expression true when field equals one of the names, where '*' and '?' are
// wildcards (Kyverno's).
func nameMatches(field string, names []string) string {
	var exact, patterns []string
	for _, n := range names {
		if !strings.ContainsAny(n, "*?") {
			exact = append(exact, celString(n))
			continue
		}
		quoted := regexp.QuoteMeta(n)
		quoted = strings.ReplaceAll(quoted, `\*`, ".*")
		quoted = strings.ReplaceAll(quoted, `\?`, ".")
		patterns = append(patterns, field+".matches("+celString("^"+quoted+"$")+")")
	}
	var terms []string
	if len(exact) > 0 {
		terms = append(terms, field+" in ["+strings.Join(exact, ", ")+"]")
	}
	terms = append(terms, patterns...)
	return strings.Join(terms, " || ")
}

// selectorCEL is a label selector as a CEL expression over object.metadata.labels.
func selectorCEL(s *policyhubv1.ClusterSelector) (string, error) {
	const labels = "object.metadata.labels"
	has := func(key string) string { return "(has(" + labels + ") && " + celString(key) + " in " + labels + ")" }
	var terms []string
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		terms = append(terms, has(k)+" && "+labels+"["+celString(k)+"] == "+celString(s.MatchLabels[k]))
	}
	for _, e := range s.MatchExpressions {
		values := make([]string, 0, len(e.Values))
		for _, v := range e.Values {
			values = append(values, celString(v))
		}
		in := labels + "[" + celString(e.Key) + "] in [" + strings.Join(values, ", ") + "]"
		switch e.Operator {
		case "In":
			terms = append(terms, "("+has(e.Key)+" && "+in+")")
		case "NotIn":
			terms = append(terms, "(!"+has(e.Key)+" || !("+in+"))")
		case "Exists":
			terms = append(terms, has(e.Key))
		case "DoesNotExist":
			terms = append(terms, "!"+has(e.Key))
		default:
			return "", fmt.Errorf("spec.resources.selector: operator %q is not In, NotIn, Exists or DoesNotExist", e.Operator)
		}
	}
	if len(terms) == 0 {
		return "", fmt.Errorf("spec.resources.selector is empty: give matchLabels or matchExpressions")
	}
	return strings.Join(slices.Clip(terms), " && "), nil
}
