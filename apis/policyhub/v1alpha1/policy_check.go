package v1alpha1

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// shippedKinds are the Kyverno kinds policyhub ships from a template or a policy library, by
// group: policies, never exceptions (FleetPolicyExceptions are those) nor Kyverno's other kinds
// (GlobalContextEntry makes Kyverno call out; UpdateRequest is its own bookkeeping). Mirrored
// by PolicyTemplate's CEL rules.
var shippedKinds = map[string][]string{
	"kyverno.io": {"ClusterPolicy", "Policy", "ClusterCleanupPolicy", "CleanupPolicy"},
	"policies.kyverno.io": {"ValidatingPolicy", "NamespacedValidatingPolicy", "MutatingPolicy", "NamespacedMutatingPolicy",
		"GeneratingPolicy", "NamespacedGeneratingPolicy", "ImageValidatingPolicy", "NamespacedImageValidatingPolicy",
		"DeletingPolicy", "NamespacedDeletingPolicy"},
	// Kubernetes' own admission policies; their bindings are policyhub's (render).
	AdmissionGroup: {"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"},
	// Gatekeeper's template; its Constraints are of whatever kind a template names, all of
	// constraints.gatekeeper.sh. Never mutations.gatekeeper.sh: validation only.
	GatekeeperTemplateGroup: {"ConstraintTemplate"},
}

// AdmissionGroup is the group of Kubernetes' own admission policies.
const AdmissionGroup = "admissionregistration.k8s.io"

const shippedKindsText = "kyverno.io: ClusterPolicy, Policy, ClusterCleanupPolicy, CleanupPolicy; policies.kyverno.io: ValidatingPolicy, MutatingPolicy, GeneratingPolicy, ImageValidatingPolicy, DeletingPolicy and their Namespaced forms; admissionregistration.k8s.io: ValidatingAdmissionPolicy, MutatingAdmissionPolicy (with spec.allow Mutate); templates.gatekeeper.sh: ConstraintTemplate; constraints.gatekeeper.sh: any Constraint kind"

// kindCapability is what a policies.kyverno.io kind (or a kyverno.io cleanup kind) does beyond
// validating, whatever its spec says; ClusterPolicy and Policy do what their rules do.
var kindCapability = map[string]PolicyCapability{
	"ClusterCleanupPolicy": CapabilityCleanup, "CleanupPolicy": CapabilityCleanup,
	"DeletingPolicy": CapabilityCleanup, "NamespacedDeletingPolicy": CapabilityCleanup,
	"MutatingPolicy": CapabilityMutate, "NamespacedMutatingPolicy": CapabilityMutate, "MutatingAdmissionPolicy": CapabilityMutate,
	"GeneratingPolicy": CapabilityGenerate, "NamespacedGeneratingPolicy": CapabilityGenerate,
	"ImageValidatingPolicy": CapabilityVerifyImages, "NamespacedImageValidatingPolicy": CapabilityVerifyImages,
}

// ruleCapability is what a kyverno.io rule does by the key that says its type.
var ruleCapability = map[string]PolicyCapability{
	"mutate": CapabilityMutate, "generate": CapabilityGenerate, "verifyImages": CapabilityVerifyImages,
}

// PolicyCapabilities says what a Kyverno policy (its JSON as a map, a kind CheckPolicy takes)
// does beyond validating, sorted and each once: by its kind, and for ClusterPolicy and Policy
// by each rule's type. A rule that is none of validate, mutate, generate and verifyImages is an
// error naming it, as is a rules list that is not one.
func PolicyCapabilities(obj map[string]any) ([]PolicyCapability, error) {
	needs, err := capabilitiesOf(obj)
	if err != nil {
		return nil, err
	}
	out := make([]PolicyCapability, 0, len(needs))
	for c := range needs {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// capabilitiesOf is what PolicyCapabilities says, each with where the policy first needs it:
// its kind, or a rule by index and name.
func capabilitiesOf(obj map[string]any) (map[PolicyCapability]string, error) {
	kind, _ := obj["kind"].(string)
	if c, ok := kindCapability[kind]; ok {
		return map[PolicyCapability]string{c: "kind " + kind}, nil
	}
	if kind != "ClusterPolicy" && kind != "Policy" {
		return nil, nil
	}
	spec, _ := obj["spec"].(map[string]any)
	raw, ok := spec["rules"]
	if !ok || raw == nil {
		return nil, nil
	}
	rules, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("spec.rules: a list of rules, not %T", raw)
	}
	needs := map[PolicyCapability]string{}
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.rules[%d]: a rule object, not %T", i, r)
		}
		typed := false
		for _, key := range []string{"mutate", "generate", "verifyImages"} {
			if _, ok := rule[key]; !ok {
				continue
			}
			typed = true
			if c := ruleCapability[key]; needs[c] == "" {
				where := fmt.Sprintf("spec.rules[%d]", i)
				if name, _ := rule["name"].(string); name != "" {
					where += fmt.Sprintf(" (%s)", name)
				}
				needs[c] = where + " " + key
			}
		}
		if _, ok := rule["validate"]; !ok && !typed {
			return nil, fmt.Errorf("spec.rules[%d]: a rule validates, mutates, generates or verifies images: it has none of validate, mutate, generate, verifyImages", i)
		}
	}
	return needs, nil
}

// CheckAllowed says why a declaration that allows allow (its spec.allow) may not ship a Kyverno
// policy: what CheckPolicy refuses, and each capability the policy needs that allow lacks,
// naming the rule or the kind that needs it. nil when it may.
func CheckAllowed(obj map[string]any, allow []PolicyCapability) error {
	if err := CheckPolicy(obj); err != nil {
		return err
	}
	if IsGatekeeperObject(obj) {
		return checkGatekeeper(obj)
	}
	if kind, _ := obj["kind"].(string); kind == "ValidatingAdmissionPolicy" || kind == "MutatingAdmissionPolicy" {
		if spec, _ := obj["spec"].(map[string]any); spec["paramKind"] != nil {
			return fmt.Errorf("spec.paramKind: a %s with parameters needs parameter objects and a paramRef, which policyhub does not ship; write the values into the policy's expressions or variables", kind)
		}
	}
	needs, err := capabilitiesOf(obj)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range []PolicyCapability{CapabilityMutate, CapabilityGenerate, CapabilityCleanup, CapabilityVerifyImages} {
		if where, ok := needs[c]; ok && !slices.Contains(allow, c) {
			errs = append(errs, fmt.Errorf("%s needs %s, which spec.allow does not list: a declaration ships validating policies only unless its spec.allow lets it do more", where, c))
		}
	}
	return errors.Join(errs...)
}

// CheckPolicy says what is wrong with a Kyverno policy object (its JSON as a map), by the rules a
// FleetPolicy's template is held to at admission: PolicyTemplate's CEL rules, mirrored here for
// policies that reach the hub without passing admission (from an OCI artifact or a Git folder).
// It is CheckPolicyShape and what a declaration may ship at all: a policy kind, never an
// exception, never in the hub's namespace. nil when nothing is wrong.
// TestCheckPolicyAgreesWithTheCRD holds the two together.
func CheckPolicy(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	namespace, _ := meta["namespace"].(string)
	errs := []error{CheckPolicyShape(obj)}
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case kind == "PolicyException":
		errs = append(errs, errors.New("kind PolicyException: exceptions never arrive through a template or a policy library: they are FleetPolicyExceptions (requested, approved by someone else, expiring)"))
	case kind != "" && (group == "kyverno.io" || group == "policies.kyverno.io" || group == AdmissionGroup || group == GatekeeperTemplateGroup) && !slices.Contains(shippedKinds[group], kind):
		errs = append(errs, fmt.Errorf("kind %s of %s: not a policy kind policyhub ships (%s)", kind, group, shippedKindsText))
	}
	if namespace == SyncLeaseNamespace {
		errs = append(errs, fmt.Errorf("metadata.namespace may not be %s: it is the hub's own namespace in every cluster (its sync Lease, and Kyverno's exception namespace)", namespace))
	}
	return errors.Join(errs...)
}

// CheckPolicyShape says what is wrong with a Kyverno object's shape (its JSON as a map): an
// apiVersion of Kyverno's groups, a kind, a spec, a namespace where the kind has one, a name
// Kyverno takes and that is not a shadow's. A policy library is read by its shape; what of it a set may ship is judged on
// the members it selects (CheckAllowed), so that a library that also holds exceptions can be
// used without them (spec.select.excludeKinds).
func CheckPolicyShape(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	var errs []error
	if apiVersion == "" {
		errs = append(errs, errors.New("apiVersion is required: the Kyverno policy's apiVersion, e.g. kyverno.io/v1 or policies.kyverno.io/v1"))
	} else if !strings.HasPrefix(apiVersion, "kyverno.io/") && !strings.HasPrefix(apiVersion, "policies.kyverno.io/") && !strings.HasPrefix(apiVersion, AdmissionGroup+"/") &&
		apiVersion != GatekeeperTemplateAPIVersion && apiVersion != GatekeeperConstraintAPIVersion {
		errs = append(errs, fmt.Errorf("apiVersion %q: not a Kyverno policy, a ValidatingAdmissionPolicy or a Gatekeeper ConstraintTemplate or Constraint: the group must be kyverno.io, policies.kyverno.io or %s, or it is %s or %s (mutations.gatekeeper.sh is never shipped)",
			apiVersion, AdmissionGroup, GatekeeperTemplateAPIVersion, GatekeeperConstraintAPIVersion))
	}
	if kind == "" {
		errs = append(errs, errors.New("kind is required: the Kyverno policy's kind, e.g. ClusterPolicy or ValidatingPolicy"))
	}
	if _, ok := obj["spec"]; !ok {
		errs = append(errs, errors.New("spec is required: the Kyverno policy's spec"))
	}
	gatekeeper := IsGatekeeperObject(obj)
	if namespacedPolicyKind(kind) && namespace == "" && !gatekeeper {
		errs = append(errs, fmt.Errorf("metadata.namespace is required for a namespaced Kyverno kind (%s)", kind))
	}
	if gatekeeper && namespace != "" {
		errs = append(errs, fmt.Errorf("metadata.namespace %q: Gatekeeper's ConstraintTemplates and Constraints are cluster-scoped: leave it out", namespace))
	}
	switch {
	case len(name) > 63:
		errs = append(errs, fmt.Errorf("metadata.name %q is longer than 63 characters: Kyverno refuses policy names longer than that", name))
	case name != "" && len(validation.IsDNS1123Subdomain(name)) > 0:
		errs = append(errs, fmt.Errorf("metadata.name %q must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (a DNS-1123 subdomain)", name))
	case IsShadowName(name):
		errs = append(errs, fmt.Errorf("metadata.name %q may not start with %s: policyhub names its report-only shadows so, and their results never count as compliance", name, ShadowPrefix))
	}
	return errors.Join(errs...)
}

// namespacedPolicyKind: the Kyverno kinds that live in a namespace.
func namespacedPolicyKind(kind string) bool {
	return kind == "Policy" || kind == "PolicyException" || strings.HasPrefix(kind, "Namespaced")
}
