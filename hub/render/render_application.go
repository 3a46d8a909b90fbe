package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render/tenantcel"
)

// API versions and kinds an ApplicationPolicy renders into.
const (
	kyvernoV1                      = kyvernoGroup + "/v1"
	policiesV1                     = policiesGroup + "/v1"
	kindPolicy                     = "Policy"
	kindNamespacedValidatingPolicy = "NamespacedValidatingPolicy"
)

// ApplicationPolicy renders an ApplicationPolicy into the Kyverno policies for one target namespace
// in a cluster (the hub calls it once per (cluster, namespace) target).
//
// The application's resources are those labelled applicationLabel=application. spec.rules render
// to namespaced kyverno.io/v1 Policies, spec.validations to policies.kyverno.io/v1
// NamespacedValidatingPolicies: one for spec.scope.kinds (named after the ApplicationPolicy; its
// rules take effect together), then one per spec.scope.resources entry, in spec order (named
// <name>-<kind>-<resource>; each takes effect independently). The mode (default Audit) becomes
// every validate rule's failureAction (its failureActionOverrides dropped), or the
// validationActions (Deny for Enforce, Audit for Audit).
func ApplicationPolicy(hubID string, ap *policyhubv1.ApplicationPolicy, namespace string) ([]*unstructured.Unstructured, error) {
	objs, err := applicationPolicy(hubID, ap, namespace)
	if err != nil {
		return nil, fmt.Errorf("render ApplicationPolicy %s/%s: %w", ap.Namespace, ap.Name, err)
	}
	return objs, nil
}

func applicationPolicy(hubID string, ap *policyhubv1.ApplicationPolicy, namespace string) ([]*unstructured.Unstructured, error) {
	owner := ApplicationPolicyOwner(hubID, ap.Namespace, ap.Name)
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	if namespace == "" {
		return nil, fmt.Errorf("no target namespace: the generated policies are namespaced")
	}
	if err := tenantMayTarget(namespace); err != nil {
		return nil, err
	}
	spec := ap.Spec
	if spec.Application == "" {
		return nil, fmt.Errorf("spec.application is empty: set it to the name of the application whose resources the policy governs")
	}
	label := spec.ApplicationLabel
	if label == "" {
		label = policyhubv1.DefaultApplicationLabel
	}
	mode := spec.Mode
	if mode == "" {
		mode = policyhubv1.ModeAudit
	}
	if mode != policyhubv1.ModeAudit && mode != policyhubv1.ModeEnforce {
		return nil, fmt.Errorf("spec.mode %q: want Audit or Enforce", mode)
	}
	switch {
	case len(spec.Rules) > 0 && len(spec.Validations) > 0:
		return nil, fmt.Errorf("spec.rules and spec.validations are both set: give one of them, they render to different Kyverno kinds (Policy, NamespacedValidatingPolicy)")
	case len(spec.Rules) == 0 && len(spec.Validations) == 0:
		return nil, fmt.Errorf("nothing to enforce: set rules or validations")
	}
	if spec.Scope == nil || (len(spec.Scope.Kinds) == 0 && len(spec.Scope.Resources) == 0) {
		return nil, fmt.Errorf("spec.scope is empty: list the kinds and/or the resources of the application the policy applies to")
	}
	targets, err := scopeTargets(ap.Name, spec.Scope)
	if err != nil {
		return nil, err
	}

	var build func(target) (*unstructured.Unstructured, error)
	if len(spec.Rules) > 0 {
		rules, err := applicationRules(spec.Rules)
		if err != nil {
			return nil, err
		}
		build = func(t target) (*unstructured.Unstructured, error) {
			return applicationKyvernoPolicy(t, rules, label, spec.Application), nil
		}
	} else {
		if err := withinSandbox(validationsCEL(spec.Validations)); err != nil {
			return nil, err
		}
		build = func(t target) (*unstructured.Unstructured, error) {
			return applicationValidatingPolicy(t, spec.Validations, label, spec.Application)
		}
	}

	objs := make([]*unstructured.Unstructured, 0, len(targets))
	for _, t := range targets {
		obj, err := build(t)
		if err != nil {
			return nil, err
		}
		obj.SetName(t.name)
		obj.SetNamespace(namespace)
		if err := SetMode(obj, mode); err != nil {
			return nil, err
		}
		if err := stamp(owner, obj, nil, nil); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// target is one generated policy: the kinds it applies to and, for a resource-scoped one, the
// resource's name.
type target struct {
	name     string   // the generated policy's name
	kinds    []string // as given in the scope
	resource string   // "" for the kinds-scoped policy
}

// scopeTargets lists the generated policies: the kinds-scoped one first, then one per resource in
// spec order. Two of them may not end up with the same name.
func scopeTargets(apName string, scope *policyhubv1.Scope) ([]target, error) {
	var targets []target
	seen := map[string]string{} // generated name → what it was generated for
	add := func(t target, what string) error {
		if prev, ok := seen[t.name]; ok {
			return fmt.Errorf("%s and %s both render to the policy name %q: keep one of them", prev, what, t.name)
		}
		seen[t.name] = what
		targets = append(targets, t)
		return nil
	}
	if len(scope.Kinds) > 0 {
		if err := add(target{name: policyhubv1.GeneratedName(apName), kinds: scope.Kinds}, "spec.scope.kinds"); err != nil {
			return nil, err
		}
	}
	for i, r := range scope.Resources {
		what := fmt.Sprintf("spec.scope.resources[%d] (%s %s)", i, r.Kind, r.Name)
		if r.Kind == "" || r.Name == "" {
			return nil, fmt.Errorf("%s: give both kind and name", what)
		}
		if strings.ContainsAny(r.Name, "*?") {
			return nil, fmt.Errorf("%s: the name has a wildcard; name one resource, or list its kind in spec.scope.kinds", what)
		}
		name := policyhubv1.GeneratedName(apName + "-" + strings.ToLower(kindName(r.Kind)) + "-" + r.Name)
		if err := add(target{name: name, kinds: []string{r.Kind}, resource: r.Name}, what); err != nil {
			return nil, err
		}
	}
	return targets, nil
}

// kindName is the kind without the group/version a scope may give (apps/v1/Deployment → Deployment).
func kindName(kind string) string {
	return kind[strings.LastIndex(kind, "/")+1:]
}

// applicationRules decodes the rules. A validate rule's failureActionOverrides are dropped, so
// the mode (SetMode, on the rendered policy) alone decides. A rule must have a name (unique), no
// match (the scope decides what the rules apply to), and validate only: admission refuses the
// rest, and this refuses it again for objects stored before that (or written around it).
func applicationRules(typed []policyhubv1.ApplicationRule) ([]map[string]any, error) {
	rules := make([]map[string]any, 0, len(typed))
	names := map[string]int{}
	var cel []celField // every rule's, checked together
	for i := range typed {
		raw, err := json.Marshal(&typed[i])
		if err != nil {
			return nil, fmt.Errorf("spec.rules[%d]: %w", i, err)
		}
		rule := map[string]any{}
		// apimachinery's decoder keeps integers int64, as objects read from the API have them.
		if err := utiljson.Unmarshal(raw, &rule); err != nil {
			return nil, fmt.Errorf("spec.rules[%d] is not a Kyverno rule object: %w", i, err)
		}
		name, _ := rule["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("spec.rules[%d] has no name: give every rule a name (Kyverno reports results per rule)", i)
		}
		if j, ok := names[name]; ok {
			return nil, fmt.Errorf("spec.rules[%d] and spec.rules[%d] are both named %q: rule names must be unique", j, i, name)
		}
		names[name] = i
		if rule["match"] != nil {
			return nil, fmt.Errorf("rule %q sets match: an ApplicationPolicy's scope decides what its rules apply to; remove match", name)
		}
		if err := ValidationOnly(rule); err != nil {
			return nil, fmt.Errorf("spec.rules[%d] (%s): %w", i, name, err)
		}
		ruleCEL, err := ruleWithinSandbox(fmt.Sprintf("spec.rules[%d]", i), rule)
		if err != nil {
			return nil, err
		}
		cel = append(cel, ruleCEL...)
		validate := rule["validate"].(map[string]any)
		delete(validate, "failureActionOverrides")
		rules = append(rules, rule)
	}
	if err := withinSandbox(cel); err != nil {
		return nil, err
	}
	return rules, nil
}

// tenantForbidden are the keys a tenant's rule may not hold anywhere (foreach blocks carry their
// own context): they mutate, generate, or read and call outside the application's namespace.
var tenantForbidden = map[string]string{
	"mutate":          "mutates",
	"generate":        "generates",
	"verifyImages":    "verifies images (mutating their references, calling registries)",
	"apiCall":         "calls the API server or a service",
	"configMap":       "reads a ConfigMap, possibly of another namespace",
	"globalReference": "reads a global context entry",
	"imageRegistry":   "calls an image registry",
	"paramRef":        "reads CEL parameters, possibly of another namespace",
	"paramKind":       "reads CEL parameters, possibly of another namespace",
}

// ValidationOnly refuses a Kyverno rule that does anything but validate the resources it is
// given: it must hold a validate block, and no key of tenantForbidden at any depth.
func ValidationOnly(rule map[string]any) error {
	if _, ok := rule["validate"].(map[string]any); !ok {
		return fmt.Errorf("no validate block: an ApplicationPolicy's rules validate only")
	}
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		switch t := v.(type) {
		case map[string]any:
			for k, child := range t {
				if why, bad := tenantForbidden[k]; bad {
					return fmt.Errorf("%s.%s is not allowed: it %s; an ApplicationPolicy validates only (ask a hub admin for a FleetPolicy)", path, k, why)
				}
				if err := walk(path+"."+k, child); err != nil {
					return err
				}
			}
		case []any:
			for i, child := range t {
				if err := walk(fmt.Sprintf("%s[%d]", path, i), child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("rule", rule)
}

// tenantValidateFields are the fields of a rule's validate block a tenant may use: each checks
// the resource it is given and nothing else. Not manifests (signature verification: Kyverno
// fetches keys, certificates and transparency logs, and dry-runs the resource elsewhere), nor
// any field this list does not know.
var tenantValidateFields = map[string]bool{
	"message": true, "pattern": true, "anyPattern": true, "deny": true, "foreach": true,
	"podSecurity": true, "cel": true, "assert": true, "failureAction": true,
	"failureActionOverrides": true, "allowExistingViolations": true,
}

// ruleWithinSandbox refuses a tenant's rule whose validate block holds a field off
// tenantValidateFields, and lists its CEL (celPreconditions, validate.cel) for withinSandbox.
// path is the rule's, e.g. spec.rules[0].
func ruleWithinSandbox(path string, rule map[string]any) ([]celField, error) {
	validate, _ := rule["validate"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(validate)) {
		if k == "manifests" {
			return nil, fmt.Errorf("%s.validate.manifests is not allowed: Kyverno would fetch keys, certificates or transparency logs from outside to verify it; an ApplicationPolicy validates the resource only (ask a hub admin for a FleetPolicy)", path)
		}
		if !tenantValidateFields[k] {
			return nil, fmt.Errorf("%s.validate.%s is not a validate field an ApplicationPolicy may use (it may use %s)", path, k, strings.Join(slices.Sorted(maps.Keys(tenantValidateFields)), ", "))
		}
	}
	var fields []celField
	add := func(at string, object any, keys ...string) error {
		m, isObject := object.(map[string]any)
		if !isObject {
			return fmt.Errorf("%s: want an object, got %T", at, object)
		}
		for _, k := range keys {
			fields = append(fields, celField{at + "." + k, m[k]})
		}
		return nil
	}
	cel, isObject := validate["cel"].(map[string]any)
	if !isObject && validate["cel"] != nil {
		return nil, fmt.Errorf("%s.validate.cel: want an object, got %T", path, validate["cel"])
	}
	for _, list := range []struct {
		at    string
		items any
		keys  []string
	}{
		{path + ".celPreconditions", rule["celPreconditions"], []string{"expression"}},
		{path + ".validate.cel.expressions", cel["expressions"], []string{"expression", "messageExpression"}},
		{path + ".validate.cel.variables", cel["variables"], []string{"expression"}},
		{path + ".validate.cel.auditAnnotations", cel["auditAnnotations"], []string{"valueExpression"}},
	} {
		items, isList := list.items.([]any)
		if !isList && list.items != nil {
			return nil, fmt.Errorf("%s: want a list, got %T", list.at, list.items)
		}
		for j, item := range items {
			if err := add(fmt.Sprintf("%s[%d]", list.at, j), item, list.keys...); err != nil {
				return nil, err
			}
		}
	}
	return fields, nil
}

// validationsCEL lists an ApplicationPolicy's CEL validations for withinSandbox.
func validationsCEL(validations []policyhubv1.Validation) []celField {
	var fields []celField
	for i, v := range validations {
		fields = append(fields, celField{fmt.Sprintf("spec.validations[%d].expression", i), v.Expression},
			celField{fmt.Sprintf("spec.validations[%d].messageExpression", i), v.MessageExpression})
	}
	return fields
}

// maxTenantCEL bounds, in bytes, the CEL of one ApplicationPolicy the hub parses: a tenant
// cannot make each render cost the hub more than parsing this much.
const maxTenantCEL = 64 << 10

// celField is a value of a tenant's spec that Kyverno reads as CEL, path naming it.
type celField struct {
	path  string
	value any
}

// withinSandbox refuses CEL that tenantcel refuses, CEL that is not a string, and more CEL than
// maxTenantCEL in all (counted before any is parsed).
func withinSandbox(fields []celField) error {
	total := 0
	for _, f := range fields {
		if f.value == nil {
			continue
		}
		expression, ok := f.value.(string)
		if !ok {
			return fmt.Errorf("%s: want a CEL expression (a string), got %T", f.path, f.value)
		}
		if total += len(expression); total > maxTenantCEL {
			return fmt.Errorf("%s: the ApplicationPolicy's CEL is over %d bytes in all: split it across ApplicationPolicies", f.path, maxTenantCEL)
		}
	}
	for _, f := range fields {
		if expression, _ := f.value.(string); expression != "" {
			if err := tenantcel.Check(f.path, expression); err != nil {
				return err
			}
		}
	}
	return nil
}

// applicationSelector is the label selector of the application's resources.
func applicationSelector(label, application string) map[string]any {
	return map[string]any{"matchLabels": map[string]any{label: application}}
}

// applicationKyvernoPolicy is the kyverno.io/v1 Policy of one target: the rules, each matching the target's
// kinds (and name) among the application's resources.
func applicationKyvernoPolicy(t target, rules []map[string]any, label, application string) *unstructured.Unstructured {
	resources := map[string]any{
		"kinds":    stringsToAny(t.kinds),
		"selector": applicationSelector(label, application),
	}
	if t.resource != "" {
		resources["names"] = []any{t.resource}
	}
	match := map[string]any{"any": []any{map[string]any{"resources": resources}}}
	out := make([]any, 0, len(rules))
	for _, r := range rules {
		// No two generated policies share a rule's maps.
		rule := runtime.DeepCopyJSON(r)
		rule["match"] = runtime.DeepCopyJSON(match)
		out = append(out, rule)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kyvernoV1,
		"kind":       kindPolicy,
		"spec": map[string]any{
			// Kyverno's default, explicit: existing resources are scanned and reported too.
			"background": true,
			"rules":      out,
		},
	}}
}

// applicationValidatingPolicy is the policies.kyverno.io/v1 NamespacedValidatingPolicy of one target.
func applicationValidatingPolicy(t target, validations []policyhubv1.Validation, label, application string) (*unstructured.Unstructured, error) {
	resourceRules := make([]any, 0, len(t.kinds))
	for _, kind := range t.kinds {
		gvr, err := resourceOf(kind)
		if err != nil {
			return nil, err
		}
		resourceRules = append(resourceRules, map[string]any{
			"apiGroups":   []any{gvr.group},
			"apiVersions": []any{gvr.version},
			"operations":  []any{"CREATE", "UPDATE"},
			"resources":   []any{gvr.resource},
		})
	}
	vals := make([]any, 0, len(validations))
	for i, v := range validations {
		if v.Expression == "" {
			return nil, fmt.Errorf("spec.validations[%d] has no expression: give a CEL expression that is true for a valid resource", i)
		}
		val := map[string]any{"expression": v.Expression}
		if v.Message != "" {
			val["message"] = v.Message
		}
		if v.MessageExpression != "" {
			val["messageExpression"] = v.MessageExpression
		}
		if v.Reason != "" {
			val["reason"] = v.Reason
		}
		vals = append(vals, val)
	}
	// validationActions are SetMode's.
	spec := map[string]any{
		"matchConstraints": map[string]any{
			"resourceRules":  resourceRules,
			"objectSelector": applicationSelector(label, application),
		},
		"validations": vals,
		// Kyverno's default, explicit: existing resources are scanned and reported too.
		"evaluation": map[string]any{"background": map[string]any{"enabled": true}},
	}
	if t.resource != "" {
		spec["matchConditions"] = []any{map[string]any{
			"name":       policyhubv1.GeneratedName("is-" + t.resource),
			"expression": "object.metadata.name == " + celString(t.resource),
		}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policiesV1,
		"kind":       kindNamespacedValidatingPolicy,
		"spec":       spec,
	}}, nil
}

// celString is s as a CEL string literal.
func celString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// groupVersionResource of a kind a CEL policy's resource rule can name.
type groupVersionResource struct{ group, version, resource string }

// knownKinds maps the common kinds of an application to their resources, for CEL policies' resource
// rules (which name resources, not kinds). The order is the one the error message lists them in.
var knownKinds = []struct {
	kind string
	gvr  groupVersionResource
}{
	{"Pod", groupVersionResource{"", "v1", "pods"}},
	{"Deployment", groupVersionResource{"apps", "v1", "deployments"}},
	{"StatefulSet", groupVersionResource{"apps", "v1", "statefulsets"}},
	{"DaemonSet", groupVersionResource{"apps", "v1", "daemonsets"}},
	{"ReplicaSet", groupVersionResource{"apps", "v1", "replicasets"}},
	{"Job", groupVersionResource{"batch", "v1", "jobs"}},
	{"CronJob", groupVersionResource{"batch", "v1", "cronjobs"}},
	{"Service", groupVersionResource{"", "v1", "services"}},
	{"ConfigMap", groupVersionResource{"", "v1", "configmaps"}},
	{"Ingress", groupVersionResource{"networking.k8s.io", "v1", "ingresses"}},
	{"NetworkPolicy", groupVersionResource{"networking.k8s.io", "v1", "networkpolicies"}},
	{"PersistentVolumeClaim", groupVersionResource{"", "v1", "persistentvolumeclaims"}},
	{"ServiceAccount", groupVersionResource{"", "v1", "serviceaccounts"}},
	{"HorizontalPodAutoscaler", groupVersionResource{"autoscaling", "v2", "horizontalpodautoscalers"}},
	{"PodDisruptionBudget", groupVersionResource{"policy", "v1", "poddisruptionbudgets"}},
}

// resourceOf is the resource of a scope kind: Kind, version/Kind (core group) or group/version/Kind,
// whose group and version, when given, must be the ones of the table.
func resourceOf(kind string) (groupVersionResource, error) {
	for _, k := range knownKinds {
		apiVersion := k.gvr.version
		if k.gvr.group != "" {
			apiVersion = k.gvr.group + "/" + apiVersion
		}
		if kind == k.kind || kind == apiVersion+"/"+k.kind {
			return k.gvr, nil
		}
	}
	known := make([]string, 0, len(knownKinds))
	for _, k := range knownKinds {
		apiVersion := k.gvr.version
		if k.gvr.group != "" {
			apiVersion = k.gvr.group + "/" + apiVersion
		}
		known = append(known, k.kind+" ("+apiVersion+")")
	}
	return groupVersionResource{}, fmt.Errorf("kind %q is not one validations can apply to: the known kinds are %s; use one of them, or spec.rules for other kinds",
		kind, strings.Join(known, ", "))
}

func stringsToAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
