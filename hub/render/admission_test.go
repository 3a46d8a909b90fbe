package render

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

const admissionPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: require-team
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: Deployments need a team label
`

// A ValidatingAdmissionPolicy goes with a binding of the hub's own: the mode's actions, never the
// hub's namespace, owned as the policy; the policy itself is shipped as written.
func TestAdmissionPolicyShipsWithItsBinding(t *testing.T) {
	audit, enforce := policyhubv1.ModeAudit, policyhubv1.ModeEnforce
	for _, tc := range []struct {
		name    string
		mode    *policyhubv1.Mode
		actions []any
	}{
		{"no mode: Deny", nil, []any{"Deny"}},
		{"Enforce: Deny", &enforce, []any{"Deny"}},
		{"Audit: Audit and Warn", &audit, []any{"Audit", "Warn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := fleetPolicy(t, "require-team", admissionPolicy)
			fp.Spec.Mode = tc.mode
			got, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a", Mode: tc.mode}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			objs := got.Objects["a"]
			if len(objs) != 2 || objs[0].GetKind() != "ValidatingAdmissionPolicy" || objs[1].GetKind() != "ValidatingAdmissionPolicyBinding" {
				t.Fatalf("cluster a gets %v, want the policy and its binding", names(objs))
			}
			policy, binding := objs[0], objs[1]
			if actions, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations"); len(actions) != 1 {
				t.Errorf("the policy's validations changed: %v", actions)
			}
			if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != "require-team" || binding.GetName() != "require-team" {
				t.Errorf("binding %s binds %q, want require-team", binding.GetName(), name)
			}
			if actions, _, _ := unstructured.NestedSlice(binding.Object, "spec", "validationActions"); !reflect.DeepEqual(actions, tc.actions) {
				t.Errorf("validationActions %v, want %v", actions, tc.actions)
			}
			exprs, _, _ := unstructured.NestedSlice(binding.Object, "spec", "matchResources", "namespaceSelector", "matchExpressions")
			if len(exprs) != 1 || !strings.Contains(stringOf(exprs[0]), policyhubv1.SyncLeaseNamespace) || !strings.Contains(stringOf(exprs[0]), "NotIn") {
				t.Errorf("the binding's namespaceSelector %v does not leave the hub's namespace alone", exprs)
			}
			for _, obj := range objs {
				if obj.GetLabels()[policyhubv1.LabelManagedBy] != "hub-a" || obj.GetAnnotations()[policyhubv1.AnnotationSource] != "FleetPolicy/require-team" {
					t.Errorf("%s is not owned: %v %v", obj.GetKind(), obj.GetLabels(), obj.GetAnnotations())
				}
				if hash, _ := ContentHash(obj); obj.GetAnnotations()[policyhubv1.AnnotationContentHash] != hash {
					t.Errorf("%s: content hash is not its content's", obj.GetKind())
				}
			}
		})
	}
}

// A MutatingAdmissionPolicy (a declaration that allows Mutate) goes with a
// MutatingAdmissionPolicyBinding of the hub's own: no actions (a mutation has no mode, whatever
// the declaration's), never the hub's namespace, owned as the policy.
func TestMutatingAdmissionPolicyShipsWithItsBinding(t *testing.T) {
	fp := fleetPolicy(t, "add-team", `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: add-team}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'team': 'platform'}}}"
`)
	fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}
	audit := policyhubv1.ModeAudit
	fp.Spec.Mode = &audit
	got, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a", Mode: &audit}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := got.Objects["a"]
	if len(objs) != 2 || objs[0].GetKind() != "MutatingAdmissionPolicy" || objs[1].GetKind() != "MutatingAdmissionPolicyBinding" {
		t.Fatalf("cluster a gets %v, want the policy and its binding", names(objs))
	}
	binding := objs[1]
	if name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); name != "add-team" {
		t.Errorf("the binding binds %q", name)
	}
	if _, has := binding.Object["spec"].(map[string]any)["validationActions"]; has {
		t.Errorf("a MutatingAdmissionPolicyBinding has no validationActions: %v", binding.Object["spec"])
	}
	exprs, _, _ := unstructured.NestedSlice(binding.Object, "spec", "matchResources", "namespaceSelector", "matchExpressions")
	if len(exprs) != 1 || !strings.Contains(stringOf(exprs[0]), policyhubv1.SyncLeaseNamespace) {
		t.Errorf("the binding's namespaceSelector %v does not leave the hub's namespace alone", exprs)
	}
	if binding.GetLabels()[policyhubv1.LabelManagedBy] != "hub-a" {
		t.Errorf("the binding is not owned: %v", binding.GetLabels())
	}
	fp.Spec.Allow = nil
	if _, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a"}}, nil); err == nil || !strings.Contains(err.Error(), "needs Mutate") {
		t.Errorf("without spec.allow Mutate: %v, want refused", err)
	}
}

func TestAdmissionPolicyWithParametersIsRefused(t *testing.T) {
	fp := fleetPolicy(t, "require-team", strings.Replace(admissionPolicy, "  failurePolicy: Fail\n", "  failurePolicy: Fail\n  paramKind: {apiVersion: v1, kind: ConfigMap}\n", 1))
	_, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a"}}, nil)
	if ie, ok := AsInvalid(err); !ok || !strings.Contains(err.Error(), "spec.paramKind") {
		t.Errorf("a ValidatingAdmissionPolicy with paramKind: %v (%+v), want refused naming spec.paramKind", err, ie)
	}
}

func stringOf(v any) string {
	m, _ := v.(map[string]any)
	var b strings.Builder
	for k, x := range m {
		b.WriteString(k)
		b.WriteString("=")
		switch y := x.(type) {
		case string:
			b.WriteString(y)
		case []any:
			for _, z := range y {
				s, _ := z.(string)
				b.WriteString(s + ",")
			}
		}
		b.WriteString(";")
	}
	return b.String()
}
