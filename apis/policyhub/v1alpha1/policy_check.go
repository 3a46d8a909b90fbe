package v1alpha1

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// CheckPolicy says what is wrong with a Kyverno policy object (its JSON as a map), by the rules a
// FleetPolicy's template is held to at admission: PolicyTemplate's CEL rules, mirrored here for
// policies that reach the hub without passing admission (from an OCI artifact or a Git folder).
// nil when nothing is. TestCheckPolicyAgreesWithTheCRD holds the two together.
func CheckPolicy(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	var errs []error
	if apiVersion == "" {
		errs = append(errs, errors.New("apiVersion is required: the Kyverno policy's apiVersion, e.g. kyverno.io/v1 or policies.kyverno.io/v1"))
	} else if !strings.HasPrefix(apiVersion, "kyverno.io/") && !strings.HasPrefix(apiVersion, "policies.kyverno.io/") {
		errs = append(errs, fmt.Errorf("apiVersion %q: not a Kyverno policy: the group must be kyverno.io or policies.kyverno.io", apiVersion))
	}
	if kind == "" {
		errs = append(errs, errors.New("kind is required: the Kyverno policy's kind, e.g. ClusterPolicy or ValidatingPolicy"))
	}
	if _, ok := obj["spec"]; !ok {
		errs = append(errs, errors.New("spec is required: the Kyverno policy's spec"))
	}
	if namespacedPolicyKind(kind) && namespace == "" {
		errs = append(errs, fmt.Errorf("metadata.namespace is required for a namespaced Kyverno kind (%s)", kind))
	}
	switch {
	case len(name) > 63:
		errs = append(errs, fmt.Errorf("metadata.name %q is longer than 63 characters: Kyverno refuses policy names longer than that", name))
	case name != "" && len(validation.IsDNS1123Subdomain(name)) > 0:
		errs = append(errs, fmt.Errorf("metadata.name %q must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (a DNS-1123 subdomain)", name))
	}
	return errors.Join(errs...)
}

// namespacedPolicyKind: the Kyverno kinds that live in a namespace.
func namespacedPolicyKind(kind string) bool {
	return kind == "Policy" || kind == "PolicyException" || strings.HasPrefix(kind, "Namespaced")
}
