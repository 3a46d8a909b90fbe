package render

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ExemptHub keeps a cluster-wide policy the hub ships off the hub's own sync Lease and its
// Namespace: every write to a cluster is made under that Lease, so a policy that refused it (one
// requiring labels on every resource, say) would lock the hub out of the very cluster where it
// must change or remove that policy. It adds to the object, in the fields its kind uses:
//   - kyverno.io ClusterPolicy: to every rule's exclude.any, the Lease (by namespace and name) and
//     the Namespace (by name). Kyverno refuses any beside all, so an exclude.all of one filter
//     becomes that filter's entry of any; one of several filters cannot be written as an
//     alternative, and that rule is left as written;
//   - policies.kyverno.io cluster-scoped kinds with spec.matchConstraints: two
//     excludeResourceRules entries naming the Lease and the Namespace by resource name;
//   - Gatekeeper Constraints: the hub's namespace in spec.match.excludedNamespaces (Gatekeeper
//     matches a Namespace by its own name there, so it covers the Namespace and the Lease).
//
// Only rules and constraints that could match a Lease or a Namespace get it: Kyverno generates a
// Pod policy's rules for Deployments and the other controllers only when its exclude names no
// resource, so touching every rule would quietly stop those. Namespaced kinds (Policy,
// Namespaced*) cannot match either and are left alone.
func ExemptHub(obj *unstructured.Unstructured) error {
	if obj.GetNamespace() != "" {
		return nil
	}
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Group == kyvernoGroup && gvk.Kind == "ClusterPolicy":
		return exemptRules(obj)
	case gvk.Group == policiesGroup:
		return exemptMatchConstraints(obj)
	case IsGatekeeperConstraint(gvk):
		return exemptConstraint(obj)
	}
	return nil
}

// hubResourceFilters are Kyverno resource filters (kyverno.io/v1) of the hub's Lease and Namespace.
func hubResourceFilters() []any {
	return []any{
		map[string]any{"resources": map[string]any{
			"kinds": []any{"Lease"}, "namespaces": []any{policyhubv1.SyncLeaseNamespace}, "names": []any{policyhubv1.SyncLeaseName},
		}},
		map[string]any{"resources": map[string]any{
			"kinds": []any{"Namespace"}, "names": []any{policyhubv1.SyncLeaseNamespace},
		}},
	}
}

func exemptRules(obj *unstructured.Unstructured) error {
	rules, found, err := unstructured.NestedSlice(obj.Object, "spec", "rules")
	if err != nil || !found {
		return err
	}
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return fmt.Errorf("spec.rules[%d] is not an object", i)
		}
		if !ruleMayMatchHub(rule) {
			continue
		}
		exclude, _ := rule["exclude"].(map[string]any)
		var anyOf []any
		switch {
		case exclude == nil:
		case exclude["any"] != nil:
			anyOf, _ = exclude["any"].([]any)
		case exclude["all"] != nil:
			// all: every filter must match. As one entry of any it keeps that meaning, beside ours,
			// only when it is a single filter; several cannot be expressed as an alternative.
			all, _ := exclude["all"].([]any)
			if len(all) != 1 {
				continue
			}
			anyOf = all
		default:
			// The deprecated form: the filter's fields directly under exclude.
			anyOf = []any{exclude}
		}
		rule["exclude"] = map[string]any{"any": append(anyOf, hubResourceFilters()...)}
	}
	return unstructured.SetNestedSlice(obj.Object, rules, "spec", "rules")
}

func exemptMatchConstraints(obj *unstructured.Unstructured) error {
	constraints, found, err := unstructured.NestedMap(obj.Object, "spec", "matchConstraints")
	if err != nil || !found || !constraintsMayMatchHub(constraints) {
		return err
	}
	excluded, _ := constraints["excludeResourceRules"].([]any)
	constraints["excludeResourceRules"] = append(excluded,
		map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "apiVersions": []any{"*"}, "resources": []any{"leases"}, "operations": []any{"*"}, "resourceNames": []any{policyhubv1.SyncLeaseName}},
		map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"*"}, "resources": []any{"namespaces"}, "operations": []any{"*"}, "resourceNames": []any{policyhubv1.SyncLeaseNamespace}},
	)
	return unstructured.SetNestedMap(obj.Object, constraints, "spec", "matchConstraints")
}

// ruleMayMatchHub says whether a kyverno.io rule's match names a kind that is, or may be, a Lease
// or a Namespace ("*", "Lease", "coordination.k8s.io/v1/Lease", "*/Namespace", ...).
func ruleMayMatchHub(rule map[string]any) bool {
	match, _ := rule["match"].(map[string]any)
	filters := []any{match}
	for _, key := range []string{"any", "all"} {
		if list, ok := match[key].([]any); ok {
			filters = append(filters, list...)
		}
	}
	for _, f := range filters {
		filter, _ := f.(map[string]any)
		resources, _ := filter["resources"].(map[string]any)
		kinds, _ := resources["kinds"].([]any)
		for _, k := range kinds {
			kind, _ := k.(string)
			if last := kind[strings.LastIndex(kind, "/")+1:]; last == "*" || last == "Lease" || last == "Namespace" {
				return true
			}
		}
	}
	return false
}

// constraintsMayMatchHub says whether matchConstraints' resourceRules may cover leases or
// namespaces (by group "", coordination.k8s.io or "*", and resource, "*" included).
func constraintsMayMatchHub(constraints map[string]any) bool {
	rules, _ := constraints["resourceRules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		groups, _ := rule["apiGroups"].([]any)
		resources, _ := rule["resources"].([]any)
		for _, g := range groups {
			for _, res := range resources {
				switch g {
				case "*":
					if res == "*" || res == "leases" || res == "namespaces" || res == "*/*" {
						return true
					}
				case "":
					if res == "*" || res == "namespaces" || res == "*/*" {
						return true
					}
				case "coordination.k8s.io":
					if res == "*" || res == "leases" || res == "*/*" {
						return true
					}
				}
			}
		}
	}
	return false
}
