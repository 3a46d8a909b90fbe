package evaluate

import (
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTargets(t *testing.T) {
	list := []string{"list", "watch", "get"}
	served := []*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Verbs: list}, {Name: "deployments/status", Namespaced: true, Verbs: list},
			{Name: "statefulsets", Namespaced: true, Verbs: list}}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Verbs: list}, {Name: "namespaces", Verbs: list},
			{Name: "bindings", Namespaced: true, Verbs: []string{"create"}}}},
		{GroupVersion: "example.com/v1beta1", APIResources: []metav1.APIResource{{Name: "widgets", Namespaced: true, Verbs: list}}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{{Name: "widgets", Namespaced: true, Verbs: list}}},
	}
	preferred := map[string]string{"apps": "v1", "": "v1", "example.com": "v1"}
	rule := func(groups, versions, resources []string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: ops,
					Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources, Scope: &scope}}}}}}}
	}
	s := func(v ...string) []string { return v }
	for _, tc := range []struct {
		name   string
		policy *admissionregistrationv1.ValidatingAdmissionPolicy
		max    int
		want   string
		cut    int
	}{
		{"one resource", rule(s("apps"), s("v1"), s("deployments"), "*", "CREATE"), 0, "[apps/v1, Resource=deployments]", 0},
		{"deletions only: nothing to judge", rule(s("apps"), s("v1"), s("deployments"), "*", "DELETE"), 0, "[]", 0},
		{"every resource of a group, no subresource", rule(s("apps"), s("*"), s("*"), "*", "*"), 0,
			"[apps/v1, Resource=deployments apps/v1, Resource=statefulsets]", 0},
		{"the preferred version of a resource served at two", rule(s("example.com"), s("*"), s("widgets"), "*", "UPDATE"), 0,
			"[example.com/v1, Resource=widgets]", 0},
		{"the version the rule names", rule(s("example.com"), s("v1beta1"), s("widgets"), "*", "CREATE"), 0,
			"[example.com/v1beta1, Resource=widgets]", 0},
		{"cluster scope only", rule(s("*"), s("*"), s("*"), "Cluster", "CREATE"), 0, "[/v1, Resource=namespaces]", 0},
		{"not listable: left out", rule(s(""), s("v1"), s("bindings"), "*", "CREATE"), 0, "[]", 0},
		{"bounded", rule(s("*"), s("*"), s("*"), "*", "*"), 2, "[/v1, Resource=configmaps /v1, Resource=namespaces]", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets, cut := Targets([]*admissionregistrationv1.ValidatingAdmissionPolicy{tc.policy}, served, preferred, tc.max)
			var gvrs []string
			for _, tg := range targets {
				gvrs = append(gvrs, tg.GVR.String())
			}
			if got := fmt.Sprint(gvrs); got != tc.want || cut != tc.cut {
				t.Errorf("targets %s, cut %d; want %s, cut %d", got, cut, tc.want, tc.cut)
			}
		})
	}
}
