package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Invalid ApplicationPolicies dispatch nothing: what admission can check is refused with a clear
// message (a rule that sets its own match, or mutates); what only rendering finds (an API call
// deep inside a validate block, which the CRD keeps schemaless) is Stalled with the reason.
func TestApplicationPolicyInvalidIsNotDispatched(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "ap-invalid"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-1").Config), ns)

	for _, tc := range []struct {
		what, want string
		edit       func(*policyhubv1.ApplicationPolicy)
	}{
		{"bad mode", "Audit", func(ap *policyhubv1.ApplicationPolicy) { ap.Spec.Mode = "Sometimes" }},
		{"no rules", "give spec.rules", func(ap *policyhubv1.ApplicationPolicy) { ap.Spec.Rules = nil }},
		{"empty scope", "scope needs kinds or resources", func(ap *policyhubv1.ApplicationPolicy) { ap.Spec.Scope.Kinds = nil }},
		{"a rule with its own match", "match is not allowed", func(ap *policyhubv1.ApplicationPolicy) {
			ap.Spec.Rules[0].Match = &runtime.RawExtension{Raw: []byte(`{"any":[{"resources":{"kinds":["Pod"]}}]}`)}
		}},
		{"a mutating rule", "may not mutate", func(ap *policyhubv1.ApplicationPolicy) {
			ap.Spec.Rules[0].Mutate = &runtime.RawExtension{Raw: []byte(`{"patchStrategicMerge":{"metadata":{"labels":{"x":"y"}}}}`)}
		}},
		{"an API call in context", "may hold only variables", func(ap *policyhubv1.ApplicationPolicy) {
			ap.Spec.Rules[0].Context = []policyhubv1.RuleContextEntry{{Name: "s", APICall: &runtime.RawExtension{Raw: []byte(`{"urlPath":"/api/v1/secrets"}`)}}}
		}},
	} {
		ap := &policyhubv1.ApplicationPolicy{}
		if err := yaml.Unmarshal([]byte(teamApplicationPolicy("refused", ns, "Audit", "cluster-1")), ap); err != nil {
			t.Fatal(err)
		}
		tc.edit(ap)
		err := hub.Create(ctx, ap)
		if err == nil {
			_ = hub.Delete(ctx, ap)
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want Invalid mentioning %q", tc.what, err, tc.want)
		}
	}

	deepCall := strings.Replace(teamApplicationPolicy("deep-call", ns, "Enforce", "cluster-1"),
		`validate: {message: "shop Deployments need a team label", pattern: {metadata: {labels: {team: "?*"}}}}`,
		`validate: {foreach: [{list: "request.object.spec.template.spec.containers", context: [{name: s, apiCall: {urlPath: /api/v1/secrets}}], deny: {conditions: {any: [{key: "{{ s }}", operator: Equals, value: ""}]}}}]}`, 1)
	createApplicationPolicy(t, deepCall)
	ap := waitApplicationPolicy(t, ns, "deep-call", 60*time.Second, "Stalled with the reason", func(ap *appView) error {
		for _, c := range ap.Status.Conditions {
			if c.Type == policyhubv1.ConditionStalled && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "apiCall is not allowed") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", ap.Status.Conditions)
	})
	if len(ap.Clusters) != 0 {
		t.Errorf("a stalled ApplicationPolicy reports clusters: %+v", ap.Clusters)
	}
	if got := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "Policy", ns); len(got) != 0 {
		t.Errorf("a stalled ApplicationPolicy dispatched %v to cluster-1", got)
	}
}
