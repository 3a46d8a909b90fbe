package evaluate

import (
	"cmp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Target is a resource type whose objects are listed and judged.
type Target struct {
	GVR        schema.GroupVersionResource
	Namespaced bool
}

// Targets are the resource types the policies' matchConstraints name (the bindings can only
// narrow them), among those the cluster serves (served: discovery's lists, one per group
// version; preferred: each group's preferred version), at most max, by group, resource: each
// type once, at the group's preferred version when the rules allow it (a resource served at
// several versions is one set of objects), else the first version the rules allow. Only rules
// of creations or updates count (a policy of deletions has nothing to say of what exists), and
// only resources that can be listed, not subresources. cut is how many more there were.
func Targets(policies []*admissionregistrationv1.ValidatingAdmissionPolicy, served []*metav1.APIResourceList, preferred map[string]string, max int) (targets []Target, cut int) {
	type groupResource struct{ group, resource string }
	chosen := map[groupResource]Target{}
	for _, list := range served {
		if list == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			if !anyRuleMatches(policies, gv, r) {
				continue
			}
			key := groupResource{gv.Group, r.Name}
			prev, seen := chosen[key]
			if seen && (prev.GVR.Version == preferred[gv.Group] || gv.Version != preferred[gv.Group]) {
				continue // the preferred version, or the first allowed, is kept
			}
			chosen[key] = Target{GVR: gv.WithResource(r.Name), Namespaced: r.Namespaced}
		}
	}
	for _, t := range chosen {
		targets = append(targets, t)
	}
	slices.SortFunc(targets, func(a, b Target) int {
		return cmp.Or(strings.Compare(a.GVR.Group, b.GVR.Group), strings.Compare(a.GVR.Resource, b.GVR.Resource))
	})
	if max > 0 && len(targets) > max {
		return targets[:max], len(targets) - max
	}
	return targets, 0
}

// anyRuleMatches says whether a rule of some policy's matchConstraints names the resource r
// of gv, for creations or updates, at r's scope.
func anyRuleMatches(policies []*admissionregistrationv1.ValidatingAdmissionPolicy, gv schema.GroupVersion, r metav1.APIResource) bool {
	for _, p := range policies {
		if p == nil || p.Spec.MatchConstraints == nil {
			continue
		}
		for _, rule := range p.Spec.MatchConstraints.ResourceRules {
			if ruleMatches(rule.RuleWithOperations, gv, r) {
				return true
			}
		}
	}
	return false
}

func ruleMatches(rule admissionregistrationv1.RuleWithOperations, gv schema.GroupVersion, r metav1.APIResource) bool {
	if !slices.ContainsFunc(rule.Operations, func(op admissionregistrationv1.OperationType) bool {
		return op == admissionregistrationv1.OperationAll || op == admissionregistrationv1.Create || op == admissionregistrationv1.Update
	}) {
		return false
	}
	if !oneOf(rule.APIGroups, gv.Group) || !oneOf(rule.APIVersions, gv.Version) {
		return false
	}
	if !slices.ContainsFunc(rule.Resources, func(s string) bool { return s == "*" || s == "*/*" || s == r.Name }) {
		return false
	}
	scope := admissionregistrationv1.AllScopes
	if rule.Scope != nil {
		scope = *rule.Scope
	}
	switch scope {
	case admissionregistrationv1.NamespacedScope:
		return r.Namespaced
	case admissionregistrationv1.ClusterScope:
		return !r.Namespaced
	}
	return true
}

// oneOf says whether values names v or everything ("*").
func oneOf(values []string, v string) bool {
	return slices.Contains(values, "*") || slices.Contains(values, v)
}
