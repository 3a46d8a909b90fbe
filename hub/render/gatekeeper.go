package render

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Gatekeeper: a ConstraintTemplate makes a Constraint kind; the Constraints of that kind say
// where and how it enforces (spec.match, spec.enforcementAction). The mode is a Constraint's.

// IsGatekeeperTemplate says whether objects of the kind are Gatekeeper ConstraintTemplates.
func IsGatekeeperTemplate(gvk schema.GroupVersionKind) bool {
	return gvk.Group == policyhubv1.GatekeeperTemplateGroup && gvk.Kind == "ConstraintTemplate"
}

// IsGatekeeperConstraint says whether objects of the kind are Gatekeeper Constraints (any kind
// of constraints.gatekeeper.sh).
func IsGatekeeperConstraint(gvk schema.GroupVersionKind) bool {
	return gvk.Group == policyhubv1.GatekeeperConstraintGroup
}

// GatekeeperAction is the Constraint's spec.enforcementAction for a mode: Enforce denies; Audit
// warns, so that a user whose request violates it is told at admission while it is admitted, and
// the audit reports it (dryrun would only report: nobody learns before the audit's next round).
func GatekeeperAction(mode policyhubv1.Mode) string {
	if mode == policyhubv1.ModeEnforce {
		return "deny"
	}
	return "warn"
}

// setEnforcementAction sets a Constraint's spec.enforcementAction to the mode's.
func setEnforcementAction(obj *unstructured.Unstructured, mode policyhubv1.Mode) error {
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s: spec is not an object", obj.GetKind(), obj.GetName())
	}
	spec["enforcementAction"] = GatekeeperAction(mode)
	// The mode says it all: scoped actions (refused by CheckAllowed anyway) would not apply.
	delete(spec, "scopedEnforcementActions")
	return nil
}

// exemptConstraint adds the hub's namespace to a Constraint's spec.match.excludedNamespaces.
func exemptConstraint(obj *unstructured.Unstructured) error {
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s: spec is not an object", obj.GetKind(), obj.GetName())
	}
	match, found := spec["match"]
	if !found || match == nil {
		match = map[string]any{}
	}
	m, ok := match.(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s: spec.match is not an object", obj.GetKind(), obj.GetName())
	}
	excluded, found := m["excludedNamespaces"]
	list, ok := excluded.([]any)
	if found && excluded != nil && !ok {
		return fmt.Errorf("%s %s: spec.match.excludedNamespaces is not a list", obj.GetKind(), obj.GetName())
	}
	if !slices.Contains(list, any(policyhubv1.SyncLeaseNamespace)) {
		list = append(slices.Clip(list), policyhubv1.SyncLeaseNamespace)
	}
	m["excludedNamespaces"] = list
	spec["match"] = m
	return nil
}
