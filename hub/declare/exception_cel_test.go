package declare

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception whose CEL conditions leave the tenant sandbox is Invalid, naming the condition and
// the function, approved or not; an expired one stays Expired; one within the sandbox keeps its
// verdict.
func TestSandboxedException(t *testing.T) {
	active := ExceptionVerdict{State: policyhubv1.ExceptionActive, Message: "approved by alice", Wake: time.Hour}
	pending := ExceptionVerdict{State: policyhubv1.ExceptionPending, Message: "awaiting approval", Wake: time.Hour}
	expired := ExceptionVerdict{State: policyhubv1.ExceptionExpired, Message: "expired"}
	for _, tc := range []struct {
		name       string
		conditions []string
		verdict    ExceptionVerdict
		state      string
		message    string
	}{
		{"approved, calling http.Get", []string{"object.metadata.name == 'web'", "http.Get('http://192.0.2.2/') != null"}, active,
			policyhubv1.ExceptionInvalid, "spec.resources.matchConditions[1].expression: calls http.Get, which a tenant's CEL may not (allowed: "},
		{"pending, listing secrets", []string{"resource.List('v1', 'secrets', '').items.size() > 0"}, pending,
			policyhubv1.ExceptionInvalid, "spec.resources.matchConditions[0].expression: calls resource.List"},
		{"approved, not CEL", []string{"object.metadata.name =="}, active,
			policyhubv1.ExceptionInvalid, "spec.resources.matchConditions[0].expression: is not CEL the hub can parse"},
		{"expired, calling http.Get", []string{"http.Get('http://x') != null"}, expired, policyhubv1.ExceptionExpired, "expired"},
		{"approved, within the sandbox", []string{"object.metadata.labels['tier'] == 'edge'"}, active, policyhubv1.ExceptionActive, "approved by alice"},
		{"approved, no conditions", nil, active, policyhubv1.ExceptionActive, "approved by alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &policyhubv1.FleetPolicyException{}
			ex.Spec.ExpiresAt = metav1.NewTime(time.Now().Add(time.Hour))
			for i, c := range tc.conditions {
				ex.Spec.Resources.MatchConditions = append(ex.Spec.Resources.MatchConditions,
					policyhubv1.ExceptionMatchCondition{Name: string(rune('a' + i)), Expression: c})
			}
			got := SandboxedException(ex, tc.verdict)
			if got.State != tc.state || !strings.Contains(got.Message, tc.message) {
				t.Fatalf("SandboxedException = %+v, want state %s, message containing %q", got, tc.state, tc.message)
			}
			if got.State == policyhubv1.ExceptionInvalid && got.Wake != 0 {
				t.Errorf("an Invalid exception wakes after %s: only a change of it can change its state", got.Wake)
			}
		})
	}
}
