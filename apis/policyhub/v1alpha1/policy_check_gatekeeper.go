package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// What the hub ships of Gatekeeper, and what it refuses to (CheckAllowed): the admission CEL of a
// template sees only its apiVersion, kind and metadata (its spec is schemaless), so what a
// template's or a Constraint's spec says is judged here, when the hub renders it.

// The Gatekeeper versions the hub ships: a template's v1 (its stable API), a Constraint's v1beta1
// (Gatekeeper 3.23 serves constraints at v1beta1 and v1alpha1 only).
const (
	GatekeeperTemplateAPIVersion   = GatekeeperTemplateGroup + "/v1"
	GatekeeperConstraintAPIVersion = GatekeeperConstraintGroup + "/v1beta1"
)

// GatekeeperTarget is the target of Gatekeeper's validating admission, the one Gatekeeper
// registers: a template naming another would be refused by each cluster's Gatekeeper later.
const GatekeeperTarget = "admission.k8s.gatekeeper.sh"

// GatekeeperActions are the enforcementActions a shipped Constraint may have: deny, warn and
// dryrun (and none: Gatekeeper's default, deny). "scoped" is refused: its
// scopedEnforcementActions send the constraint to enforcement points chosen per constraint
// (vap.k8s.io makes Gatekeeper write a ValidatingAdmissionPolicyBinding the hub does not own,
// and a constraint not enforced at audit.gatekeeper.sh reports no results), so neither the
// declaration's mode nor its in-force and compliance could say what it does.
var GatekeeperActions = []string{"deny", "warn", "dryrun"}

// gatekeeperUnsafeBuiltins are Rego built-ins that reach beyond the object under review: the
// network (http.send, net.lookup_ip_addr), Gatekeeper's external data providers
// (external_data), and the Gatekeeper process's own environment (opa.runtime). A library writer
// may ship templates; none may make every cluster's admission call out or read its process.
// Gatekeeper's release disables only http.send (--disable-opa-builtin), which a cluster's admin
// can change: the hub does not rely on it.
var gatekeeperUnsafeBuiltins = regexp.MustCompile(`\b(http\.send|net\.lookup_ip_addr|opa\.runtime|external_data)\b`)

// IsGatekeeperObject says whether obj (a policy's JSON as a map) is of Gatekeeper's template or
// constraint group.
func IsGatekeeperObject(obj map[string]any) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	group, _, _ := strings.Cut(apiVersion, "/")
	return group == GatekeeperTemplateGroup || group == GatekeeperConstraintGroup
}

// checkGatekeeper says what the hub will not ship of a Gatekeeper ConstraintTemplate or
// Constraint (CheckPolicy passed): nil when nothing.
func checkGatekeeper(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return errors.New("spec: an object")
	}
	if strings.HasPrefix(apiVersion, GatekeeperConstraintGroup+"/") {
		kind, _ := obj["kind"].(string)
		return errors.Join(otherEnginesKind("kind", kind), checkConstraint(spec))
	}
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return checkConstraintTemplate(name, spec)
}

func checkConstraint(spec map[string]any) error {
	var errs []error
	if v, found := spec["enforcementAction"]; found {
		action, _ := v.(string)
		if !slices.Contains(GatekeeperActions, action) {
			errs = append(errs, fmt.Errorf("spec.enforcementAction %q: a shipped Constraint is deny, warn or dryrun (or set by the declaration's mode); scoped enforcement actions choose enforcement points the hub cannot report on (a ValidatingAdmissionPolicyBinding Gatekeeper writes, an audit switched off)", action))
		}
	}
	if _, found := spec["scopedEnforcementActions"]; found {
		errs = append(errs, errors.New("spec.scopedEnforcementActions: not shipped: the declaration's mode says how a Constraint enforces (Enforce: deny, Audit: warn)"))
	}
	return errors.Join(errs...)
}

func checkConstraintTemplate(name string, spec map[string]any) error {
	var errs []error
	kind, _, _ := nestedString(spec, "crd", "spec", "names", "kind")
	switch {
	case kind == "":
		errs = append(errs, errors.New("spec.crd.spec.names.kind is required: the kind of the template's Constraints"))
	case otherEnginesKind("spec.crd.spec.names.kind", kind) != nil:
		errs = append(errs, otherEnginesKind("spec.crd.spec.names.kind", kind))
	case name != "" && name != strings.ToLower(kind):
		errs = append(errs, fmt.Errorf("metadata.name %q: Gatekeeper names a template as its Constraint kind in lower case (%q)", name, strings.ToLower(kind)))
	}
	targets, ok := spec["targets"].([]any)
	if !ok || len(targets) != 1 {
		errs = append(errs, fmt.Errorf("spec.targets: exactly one target, %s (Gatekeeper takes one)", GatekeeperTarget))
		return errors.Join(errs...)
	}
	target, _ := targets[0].(map[string]any)
	if t, _ := target["target"].(string); t != GatekeeperTarget {
		errs = append(errs, fmt.Errorf("spec.targets[0].target %q: the hub ships templates of Gatekeeper's validating admission only (%s)", t, GatekeeperTarget))
	}
	if code, ok := target["code"].([]any); ok {
		for i, c := range code {
			entry, _ := c.(map[string]any)
			if generate, _, _ := nestedBool(entry, "source", "generateVAP"); generate {
				errs = append(errs, fmt.Errorf("spec.targets[0].code[%d].source.generateVAP: the hub does not ship templates that make Gatekeeper write ValidatingAdmissionPolicies: they would enforce through objects the hub does not own, and it could not tell them in force", i))
			}
		}
	}
	// Rego may be in rego, libs or code[].source: every string of the target is looked at.
	text, err := json.Marshal(target)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("spec.targets[0]: %w", err))...)
	}
	if found := gatekeeperUnsafeBuiltins.FindAllString(string(text), -1); len(found) > 0 {
		slices.Sort(found)
		errs = append(errs, fmt.Errorf("spec.targets[0] names %s: Rego that calls out of the cluster or reads Gatekeeper's process is never shipped (even in a comment)", strings.Join(slices.Compact(found), ", ")))
	}
	return errors.Join(errs...)
}

// otherEnginesKind refuses a Constraint kind named as a policy kind of another engine the hub
// ships (ClusterPolicy, ValidatingPolicy, ValidatingAdmissionPolicy …): the hub folds a
// cluster's results into a declaration by kind and name, and would mix the two.
func otherEnginesKind(field, kind string) error {
	for group, kinds := range shippedKinds {
		if group != GatekeeperTemplateGroup && slices.Contains(kinds, kind) {
			return fmt.Errorf("%s %q: a policy kind of %s: a Constraint kind of that name would mix its results with that engine's", field, kind, group)
		}
	}
	return nil
}

// nestedString reads a string at path in m; found false when a step is missing or not a map.
func nestedString(m map[string]any, path ...string) (string, bool, error) {
	v, found := nested(m, path...)
	s, ok := v.(string)
	if found && !ok {
		return "", true, fmt.Errorf("%s: not a string", strings.Join(path, "."))
	}
	return s, found, nil
}

func nestedBool(m map[string]any, path ...string) (bool, bool, error) {
	v, found := nested(m, path...)
	b, ok := v.(bool)
	if found && !ok {
		return false, true, fmt.Errorf("%s: not a boolean", strings.Join(path, "."))
	}
	return b, found, nil
}

func nested(m map[string]any, path ...string) (any, bool) {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return v, true
}
