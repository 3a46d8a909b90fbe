package declare

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The hub proves the fence from what is installed: each policy of the fence, checking exactly what
// policyhub ships (under any name, as the chart renames them), failing closed, matching every
// request, and bound to deny every request it matches. Anything less is named.
func TestExceptionFenceMissing(t *testing.T) {
	fence, err := NewExceptionFence()
	if err != nil {
		t.Fatal(err)
	}
	shipped := func() ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
		var bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
		policies := make([]admissionregistrationv1.ValidatingAdmissionPolicy, 0, len(fence.policies))
		for _, p := range fence.policies {
			policies = append(policies, *p.DeepCopy())
			bindings = append(bindings, admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
					PolicyName: p.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
			})
		}
		return policies, bindings
	}
	approval := func(policies []admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
		for i := range policies {
			if strings.HasSuffix(policies[i].Name, "-exception-approval") {
				return &policies[i]
			}
		}
		t.Fatal("no approval policy")
		return nil
	}
	cases := []struct {
		name   string
		change func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		want   string // "" when the fence is in place
	}{
		{name: "as shipped"},
		{name: "as the chart names them", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			for i := range p {
				p[i].Name = strings.Replace(p[i].Name, "policyhub", "fleet-hub", 1)
				b[i].Spec.PolicyName = p[i].Name
			}
			return p, b
		}},
		{name: "as the apiserver defaults them", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			for i := range p {
				m := p[i].Spec.MatchConstraints
				m.NamespaceSelector, m.ObjectSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
				m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
				for j := range m.ResourceRules {
					m.ResourceRules[j].Scope = ptr.To(admissionregistrationv1.AllScopes)
				}
				b[i].Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
					MatchPolicy: ptr.To(admissionregistrationv1.Equivalent)}
			}
			return p, b
		}},
		{name: "nothing installed", change: func(_ []admissionregistrationv1.ValidatingAdmissionPolicy, _ []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			return nil, nil
		}, want: "ValidatingAdmissionPolicy policyhub-exception-requester (config/admission/exceptions.yaml, or the hub chart's <release>-exception-requester) is not installed"},
		{name: "the approval binding removed", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			return p, b[:1]
		}, want: "ValidatingAdmissionPolicy policyhub-exception-approval has no ValidatingAdmissionPolicyBinding that denies every request it matches"},
		{name: "bound to warn only", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b[1].Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
			return p, b
		}, want: "policyhub-exception-approval has no ValidatingAdmissionPolicyBinding that denies"},
		{name: "bound to some namespaces only", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b[1].Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"strict": "yes"}}}
			return p, b
		}, want: "has no ValidatingAdmissionPolicyBinding that denies"},
		{name: "bound to another policy", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b[1].Spec.PolicyName = "something-else"
			return p, b
		}, want: "has no ValidatingAdmissionPolicyBinding that denies"},
		{name: "failing open", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			approval(p).Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			return p, b
		}, want: "ValidatingAdmissionPolicy policyhub-exception-approval differs from policyhub's policyhub-exception-approval (config/admission/exceptions.yaml)"},
		{name: "a check dropped (an older fence)", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			a := approval(p)
			a.Spec.Validations = a.Spec.Validations[:len(a.Spec.Validations)-1]
			return p, b
		}, want: "differs from policyhub's policyhub-exception-approval"},
		{name: "a check weakened", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			a := approval(p)
			a.Spec.Validations[0].Expression = "true || " + a.Spec.Validations[0].Expression
			return p, b
		}, want: "differs from policyhub's policyhub-exception-approval"},
		{name: "matching some namespaces only", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			approval(p).Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"strict": "yes"}}
			return p, b
		}, want: "differs from policyhub's policyhub-exception-approval"},
		{name: "matching fewer operations", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			p[0].Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
			return p, b
		}, want: "differs from policyhub's policyhub-exception-requester"},
		{name: "skipping some requests", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			approval(p).Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-me", Expression: "request.userInfo.username != 'mallory'"}}
			return p, b
		}, want: "differs from policyhub's policyhub-exception-approval"},
		// A faithful copy elsewhere is enough, whatever else is installed.
		{name: "a weakened copy beside the shipped one", change: func(p []admissionregistrationv1.ValidatingAdmissionPolicy, b []admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			weak := *approval(p).DeepCopy()
			weak.Name = "old-exception-approval"
			weak.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			return append(p, weak), b
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, b := shipped()
			if tc.change != nil {
				p, b = tc.change(p, b)
			}
			got := fence.Missing(p, b)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Missing = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseExceptionFenceRefusesAnIncompleteFence(t *testing.T) {
	if _, err := parseExceptionFence([]byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: policyhub-exception-approval}\n")); err == nil {
		t.Fatal("a fence without the requester policy was read")
	}
}
