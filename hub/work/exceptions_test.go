package work

import (
	"strings"
	"testing"
)

func TestIgnoredExceptionReadsKyvernoWarnings(t *testing.T) {
	cases := []struct {
		name     string
		warnings []string
		want     []string // "" for none
	}{
		{"no warning", nil, nil},
		{"only a deprecation", []string{"kyverno.io/v2 PolicyException is deprecated"}, nil},
		{"disabled", []string{"PolicyException resources would not be processed until it is enabled."},
			[]string{"cluster c1 would ignore this exception", "--enablePolicyException", "nothing was sent"}},
		{"no namespace flag", []string{"The exceptionNamespace flag is not set"},
			[]string{"no --exceptionNamespace", "features.policyExceptions.namespace: policyhub-system"}},
		{"another namespace", []string{"deprecated", "PolicyException resource namespace must match the defined namespace."},
			[]string{"another namespace than policyhub-system", "policyhub.io/kyverno-exception-namespace"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ignoredException("c1", "policyhub-system", tc.warnings)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("got %q, want none", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}
