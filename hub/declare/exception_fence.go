package declare

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/policyhub/policyhub/config/admission"
)

// The policies of config/admission/exceptions.yaml that fence an approval: who requested, and who
// may decide. The lifetime policy is not part of the fence: the hub checks the end date itself.
var fencePolicies = []string{"policyhub-exception-requester", "policyhub-exception-approval"}

// ExceptionFence is the admission fence of exception approvals as policyhub ships it
// (config/admission/exceptions.yaml; the hub chart renders the same policies under its own
// names): the hub counts an approval only while an installed policy checks exactly what each of
// these does, bound to deny every request it matches.
type ExceptionFence struct {
	policies []admissionregistrationv1.ValidatingAdmissionPolicy
}

// NewExceptionFence reads the fence from the policies policyhub ships.
func NewExceptionFence() (ExceptionFence, error) {
	return parseExceptionFence(admission.Exceptions())
}

func parseExceptionFence(data []byte) (ExceptionFence, error) {
	var f ExceptionFence
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := dec.Decode(&p); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return f, fmt.Errorf("read policyhub's exception admission policies: %w", err)
		}
		if p.Kind == "ValidatingAdmissionPolicy" && slices.Contains(fencePolicies, p.Name) {
			f.policies = append(f.policies, p)
		}
	}
	if len(f.policies) != len(fencePolicies) {
		return f, fmt.Errorf("policyhub's exception admission policies hold %d of the policies %v", len(f.policies), fencePolicies)
	}
	return f, nil
}

// Missing says what of the fence is not in place among the hub's ValidatingAdmissionPolicies and
// their bindings: empty when every policy of the fence is installed, unchanged, and bound to deny.
func (f ExceptionFence) Missing(policies []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
	for i := range f.policies {
		if missing := fenceMissing(&f.policies[i], policies, bindings); missing != "" {
			return missing
		}
	}
	return ""
}

func fenceMissing(want *admissionregistrationv1.ValidatingAdmissionPolicy, policies []admissionregistrationv1.ValidatingAdmissionPolicy, bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
	// The chart names its policies <release>-exception-approval …, config/admission
	// policyhub-exception-approval: a policy named so that differs is named in the message.
	suffix := strings.TrimPrefix(want.Name, "policyhub")
	var same, differing []string
	for i := range policies {
		p := &policies[i]
		switch {
		case sameChecks(want, p):
			same = append(same, p.Name)
		case strings.HasSuffix(p.Name, suffix):
			differing = append(differing, p.Name)
		}
	}
	if len(same) == 0 {
		if len(differing) > 0 {
			return fmt.Sprintf("ValidatingAdmissionPolicy %s differs from policyhub's %s (config/admission/exceptions.yaml): reinstall it as shipped",
				strings.Join(differing, ", "), want.Name)
		}
		return fmt.Sprintf("ValidatingAdmissionPolicy %s (config/admission/exceptions.yaml, or the hub chart's <release>%s) is not installed", want.Name, suffix)
	}
	for i := range bindings {
		if b := &bindings[i]; slices.Contains(same, b.Spec.PolicyName) && deniesEverything(b) {
			return ""
		}
	}
	return fmt.Sprintf("ValidatingAdmissionPolicy %s has no ValidatingAdmissionPolicyBinding that denies every request it matches (policyName %s, validationActions [Deny], no paramRef, no matchResources)",
		same[0], same[0])
}

// sameChecks says whether the installed policy p checks what want checks, on every request want
// matches, failing closed.
func sameChecks(want, p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
	s := p.Spec
	if s.FailurePolicy == nil || *s.FailurePolicy != admissionregistrationv1.Fail || s.ParamKind != nil || s.MatchConstraints == nil {
		return false
	}
	if !equality.Semantic.DeepEqual(want.Spec.Validations, s.Validations) || !equality.Semantic.DeepEqual(want.Spec.Variables, s.Variables) ||
		!equality.Semantic.DeepEqual(want.Spec.MatchConditions, s.MatchConditions) {
		return false
	}
	m := s.MatchConstraints
	if !emptySelector(m.NamespaceSelector) || !emptySelector(m.ObjectSelector) || len(m.ExcludeResourceRules) > 0 {
		return false
	}
	return sameRules(want.Spec.MatchConstraints.ResourceRules, m.ResourceRules)
}

// sameRules compares resource rules without the scope the apiserver defaults.
func sameRules(want, got []admissionregistrationv1.NamedRuleWithOperations) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		w, g := want[i], got[i]
		if len(g.ResourceNames) > 0 || !slices.Equal(w.Operations, g.Operations) || !slices.Equal(w.APIGroups, g.APIGroups) ||
			!slices.Equal(w.APIVersions, g.APIVersions) || !slices.Equal(w.Resources, g.Resources) {
			return false
		}
	}
	return true
}

// deniesEverything says whether the binding denies every request its policy matches.
func deniesEverything(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
	if !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) || b.Spec.ParamRef != nil {
		return false
	}
	m := b.Spec.MatchResources
	return m == nil || (emptySelector(m.NamespaceSelector) && emptySelector(m.ObjectSelector) && len(m.ResourceRules) == 0 && len(m.ExcludeResourceRules) == 0)
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}
