package evaluate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unique"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Kind is the kind of the policies evaluated, as summaries name it.
const Kind = "ValidatingAdmissionPolicy"

// Key is the collector's key of a ValidatingAdmissionPolicy.
func Key(name string) collect.PolicyKey {
	return collect.PolicyKey{Engine: policyhubv1.EngineKubernetes, Kind: Kind, Name: name}
}

// Skipped is a policy with bindings that is not evaluated, and why.
type Skipped struct {
	Name, Reason string
}

// Set is the cluster's bound policies, compiled, ready to judge objects one at a time as the
// API server would judge their creation. Not safe for concurrent use.
type Set struct {
	policies   []*bound
	matcher    generic.PolicyMatcher
	dispatcher generic.Dispatcher[validating.PolicyHook]
	iface      admission.ObjectInterfaces
	namespaces map[string]bool
	// counts and violations are Evaluate's scratch space.
	counts     []collect.PolicyCounts
	violations []collect.Violation
	// allNamespaces: every namespace of the cluster is in namespaces, so an object in another
	// one is in a namespace made since they were listed (the matcher then reads it).
	allNamespaces bool
}

// bound is one policy and its bindings.
type bound struct {
	key      collect.PolicyKey
	policy   *admissionregistrationv1.ValidatingAdmissionPolicy
	bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	hooks    []validating.PolicyHook // one per binding, in bindings' order
	since    time.Time
}

// SetInput is what a Set is made of, read from the cluster.
type SetInput struct {
	Policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// Namespaces are the cluster's namespaces (namespaceSelector and namespaceObject read
	// them); AllNamespaces says the list is complete.
	Namespaces    []*corev1.Namespace
	AllNamespaces bool
	// Since is, per policy name, when its current version (with its bindings') was first
	// evaluated: the results' time (absent: zero).
	Since map[string]time.Time
	// Client reads a namespace made after Namespaces were listed (as the API server's matcher
	// does on a cache miss); nil: such objects are not evaluated.
	Client kubernetes.Interface
}

// NewSet compiles every policy that has a binding; a policy without one does nothing in the
// API server and is left out. Policies with paramKind are skipped (their params are objects
// the hub does not ship).
func NewSet(in SetInput) (*Set, []Skipped) {
	byPolicy := map[string][]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, b := range in.Bindings {
		if b == nil {
			continue
		}
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], b)
	}
	var skipped []Skipped
	s := &Set{iface: admission.NewObjectInterfacesFromScheme(runtime.NewScheme()), namespaces: map[string]bool{}, allNamespaces: in.AllNamespaces}
	for _, p := range in.Policies {
		if p == nil || len(byPolicy[p.Name]) == 0 {
			continue
		}
		if p.Spec.ParamKind != nil {
			skipped = append(skipped, Skipped{Name: p.Name, Reason: "has paramKind"})
			continue
		}
		s.policies = append(s.policies, newBound(p, byPolicy[p.Name], in.Since[p.Name]))
	}
	slices.SortFunc(s.policies, func(a, b *bound) int { return strings.Compare(a.key.Name, b.key.Name) })
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range in.Namespaces {
		if ns != nil {
			_ = indexer.Add(ns)
			s.namespaces[ns.Name] = true
		}
	}
	if in.Client == nil {
		s.allNamespaces = false // nothing may be read: objects of unknown namespaces are not judged
	}
	s.matcher = generic.NewPolicyMatcher(matching.NewMatcher(listersv1.NewNamespaceLister(indexer), in.Client))
	s.dispatcher = validating.NewDispatcher(noRequester, s.matcher)
	return s, skipped
}

// newBound compiles p with its bindings, each copied with its validationActions set to Deny:
// the dispatcher then returns the API server's refusal for every failing object whatever the
// binding does with it (Audit and Warn leave no trace but an annotation and a warning).
func newBound(p *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, since time.Time) *bound {
	p = defaulted(p)
	bindings = slices.Clone(bindings)
	slices.SortFunc(bindings, func(a, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) int {
		return strings.Compare(a.Name, b.Name)
	})
	b := &bound{key: Key(p.Name), policy: p, since: since}
	validator := compile(p)
	for _, binding := range bindings {
		binding = binding.DeepCopy()
		binding.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
		if m := binding.Spec.MatchResources; m != nil {
			defaultSelectors(m)
		}
		b.bindings = append(b.bindings, binding)
		b.hooks = append(b.hooks, validating.PolicyHook{Policy: p, Bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding}, Evaluator: validator})
	}
	return b
}

// defaulted is p with the API server's defaults of what matching reads (objects read from the
// API have them; the defaults matter to policies made in memory).
func defaulted(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p = p.DeepCopy()
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	if p.Spec.MatchConstraints != nil {
		defaultSelectors(p.Spec.MatchConstraints)
	}
	return p
}

func defaultSelectors(m *admissionregistrationv1.MatchResources) {
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	if m.MatchPolicy == nil {
		eq := admissionregistrationv1.Equivalent
		m.MatchPolicy = &eq
	}
}

// Policies are the keys of the policies evaluated, by name.
func (s *Set) Policies() []collect.PolicyKey {
	out := make([]collect.PolicyKey, len(s.policies))
	for i, p := range s.policies {
		out[i] = p.key
	}
	return out
}

// Len is the number of policies evaluated.
func (s *Set) Len() int { return len(s.policies) }

// noRequester answers the policies' authorizer checks: a background evaluation has no request
// and no requester, so nothing is allowed or denied (expressions see "no opinion").
var noRequester = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "background evaluation by policyhub-agent: no requester", nil
})

// ErrUnknownNamespace says an object's namespace is not among those listed.
var ErrUnknownNamespace = errors.New("namespace not listed")

// Evaluate judges obj (of resource gvr, read from the cluster) against every policy as the
// API server would judge its creation now (CREATE, no old object; a policy whose rules match
// updates only, as an update to itself) and returns its digest: one pass or fail per policy
// that matches it, the API server's message for each fail; nil when no policy matches.
func (s *Set) Evaluate(ctx context.Context, obj *unstructured.Unstructured, gvr schema.GroupVersionResource) (*collect.Digest, error) {
	if ns := obj.GetNamespace(); ns != "" && !s.namespaces[ns] && !s.allNamespaces {
		return nil, fmt.Errorf("%s %s/%s: %w", gvr.Resource, ns, obj.GetName(), ErrUnknownNamespace)
	}
	// Collected in the set's scratch slices, then copied at their size: a digest is kept per
	// object, and append's doubling would leave up to half of each unused.
	s.counts, s.violations = s.counts[:0], s.violations[:0]
	for _, p := range s.policies {
		result, rule, message := s.judge(ctx, p, obj, gvr)
		if result == "" {
			continue
		}
		counts := collect.Counts{Pass: 1}
		if result != "pass" {
			counts = collect.Counts{Fail: 1}
			// One copy of each message: a policy's message is mostly the same for every object.
			s.violations = append(s.violations, collect.Violation{Policy: p.key, Rule: rule, Result: result,
				Message: unique.Make(collect.Cut(message, collect.MaxMessage)).Value(), Time: p.since})
		}
		pc := collect.NewPolicyCounts(p.key, "", "", counts)
		pc.Saw(p.since)
		s.counts = append(s.counts, pc)
	}
	if len(s.counts) == 0 {
		return nil, nil
	}
	var violations []collect.Violation // nil for most objects
	if len(s.violations) > 0 {
		violations = slices.Clone(s.violations)
	}
	return &collect.Digest{
		Report: "background " + gvr.GroupResource().String(),
		// Copies: the object's strings may share the memory of its whole list page.
		Resource: collect.Resource{APIVersion: strings.Clone(obj.GetAPIVersion()), Kind: strings.Clone(obj.GetKind()),
			Namespace: strings.Clone(obj.GetNamespace()), Name: strings.Clone(obj.GetName()), UID: types.UID(strings.Clone(string(obj.GetUID())))},
		Policies:   slices.Clone(s.counts),
		Violations: violations,
	}, nil
}

// judge is p's result for obj: "" when p does not match it, "pass", or "fail" with the binding
// that refused and the API server's message.
func (s *Set) judge(ctx context.Context, p *bound, obj *unstructured.Unstructured, gvr schema.GroupVersionResource) (result, rule, message string) {
	for _, op := range []admission.Operation{admission.Create, admission.Update} {
		attrs := s.attributes(obj, gvr, op)
		matches, _, _, err := s.matcher.DefinitionMatches(attrs, s.iface, validating.NewValidatingAdmissionPolicyAccessor(p.policy))
		if err == nil && !matches {
			continue // e.g. a policy of updates only: judged as an update
		}
		// A policy or binding the matcher cannot read is refused (failurePolicy Fail) or
		// admitted (Ignore) by the dispatcher, as the API server does.
		for i, b := range p.bindings {
			if ok, err := s.matcher.BindingMatches(attrs, s.iface, validating.NewValidatingAdmissionPolicyBindingAccessor(b)); err == nil && !ok {
				continue
			}
			result = "pass"
			if err := s.dispatcher.Dispatch(ctx, attrs, s.iface, p.hooks[i:i+1]); err != nil {
				return "fail", b.Name, refusal(err)
			}
		}
		return result, "", ""
	}
	return "", "", ""
}

// attributes are those of a request to create obj now (or to update it to itself).
func (s *Set) attributes(obj *unstructured.Unstructured, gvr schema.GroupVersionResource, op admission.Operation) admission.Attributes {
	var old runtime.Object
	var options runtime.Object = &metav1.CreateOptions{}
	if op == admission.Update {
		old, options = obj, &metav1.UpdateOptions{}
	}
	return admission.NewAttributesRecord(obj, old, obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName(), gvr, "", op, options, false, &user.DefaultInfo{})
}

// refusal is the API server's message of a refusal without the "<resource> <name> is
// forbidden: " the summary's resource already says: the dispatcher's own cause.
func refusal(err error) string {
	var status *apierrors.StatusError
	if errors.As(err, &status) && status.ErrStatus.Details != nil {
		if causes := status.ErrStatus.Details.Causes; len(causes) > 0 {
			return causes[len(causes)-1].Message
		}
	}
	return err.Error()
}
