package work

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The Unsupported message names every missing kind, and says what helps: upgrading Kyverno, or,
// on a Kyverno that serves only the CEL kinds, rewriting a kyverno.io/v1 policy as one of them.
func TestUnsupportedMessage(t *testing.T) {
	policy := schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "Policy"}
	future := schema.GroupVersionKind{Group: "policies.kyverno.io", Version: "v9", Kind: "ValidatingPolicy"}
	tests := []struct {
		name      string
		missing   []schema.GroupVersionKind
		celServed bool
		want      []string
		not       []string
	}{
		{"a kind of a newer Kyverno", []schema.GroupVersionKind{future}, true,
			[]string{"cluster c does not serve policies.kyverno.io/v9 ValidatingPolicy: install or upgrade Kyverno", "nothing was sent"}, []string{"spec.validations"}},
		{"kyverno.io/v1 where only the CEL kinds are served", []schema.GroupVersionKind{policy}, true,
			[]string{"does not serve kyverno.io/v1 Policy", "deprecated since Kyverno 1.17", "policies.kyverno.io/v1 ValidatingPolicy", "spec.validations instead of spec.rules", "nothing was sent"}, []string{"upgrade"}},
		{"kyverno.io/v1 where no Kyverno runs", []schema.GroupVersionKind{policy}, false,
			[]string{"does not serve kyverno.io/v1 Policy: install or upgrade Kyverno"}, []string{"spec.validations"}},
		{"a ValidatingAdmissionPolicy on a Kubernetes older than 1.30", []schema.GroupVersionKind{{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}}, false,
			[]string{"does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: the Kubernetes engine", "from 1.30", "nothing was sent"}, []string{"Kyverno"}},
		{"several kinds, sorted", []schema.GroupVersionKind{policy, future}, false,
			[]string{"does not serve kyverno.io/v1 Policy, policies.kyverno.io/v9 ValidatingPolicy:"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unsupportedMessage("c", tt.missing, tt.celServed)
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("message %q lacks %q", got, want)
				}
			}
			for _, not := range tt.not {
				if strings.Contains(got, not) {
					t.Errorf("message %q should not say %q", got, not)
				}
			}
		})
	}
}
