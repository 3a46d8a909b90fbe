package evaluate

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func policy(t testing.TB, y string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict([]byte(y), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func binding(name, policy string, actions ...admissionregistrationv1.ValidationAction) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: actions}}
}

func deployment(ns, name string, labels map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": ns, "uid": ns + "-" + name}
	if labels != nil {
		meta["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
		"spec": map[string]any{"replicas": int64(1)}}}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

const teamPolicy = `
metadata: {name: vap-team}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      resources: [deployments]
      operations: [CREATE, UPDATE]
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: Deployments need a team label
`

// The results and messages the API server's own code gives, for objects in memory.
func TestSetEvaluate(t *testing.T) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	prod := map[string]string{"env": "prod"}
	for _, tc := range []struct {
		name       string
		policies   []string
		bindings   []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
		obj        *unstructured.Unstructured
		want       map[string]string // policy → result; absent: not matched
		wantMsg    string
		wantSkips  int
		namespaces []*corev1.Namespace
	}{{
		name: "fail with the API server's message, whatever the binding's actions", policies: []string{teamPolicy},
		bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("vap-team", "vap-team", "Audit", "Warn")},
		obj:      deployment("shop", "web", nil), want: map[string]string{"vap-team": "fail"},
		wantMsg: "ValidatingAdmissionPolicy 'vap-team' with binding 'vap-team' denied request: Deployments need a team label",
	}, {
		name: "pass", policies: []string{teamPolicy}, bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("vap-team", "vap-team", "Deny")},
		obj: deployment("shop", "web", map[string]any{"team": "a"}), want: map[string]string{"vap-team": "pass"},
	}, {
		name: "a policy without a binding does nothing", policies: []string{teamPolicy},
		obj: deployment("shop", "web", nil), want: map[string]string{},
	}, {
		name: "the binding's namespaceSelector narrows the policy's match", policies: []string{teamPolicy},
		bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			b := binding("prod-only", "vap-team", "Deny")
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: prod}}
			return b
		}()},
		obj: deployment("shop", "web", nil), want: map[string]string{},
	}, {
		name: "matched through the binding's namespaceSelector", policies: []string{teamPolicy},
		bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{func() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
			b := binding("prod-only", "vap-team", "Deny")
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: prod}}
			return b
		}()},
		namespaces: []*corev1.Namespace{namespace("live", prod)},
		obj:        deployment("live", "web", nil), want: map[string]string{"vap-team": "fail"},
		wantMsg: "ValidatingAdmissionPolicy 'vap-team' with binding 'prod-only' denied request: Deployments need a team label",
	}, {
		name: "matchConditions skip what they exclude", policies: []string{teamPolicy + `
  matchConditions:
  - name: not-system
    expression: "object.metadata.name != 'web'"
`}, bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("vap-team", "vap-team", "Deny")},
		obj: deployment("shop", "web", nil), want: map[string]string{"vap-team": "pass"},
	}, {
		name: "messageExpression and variables, as the API server phrases them", policies: []string{`
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}]
  variables:
  - {name: max, expression: "0"}
  validations:
  - expression: "object.spec.replicas <= variables.max"
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' > ' + string(variables.max)"
`}, bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("replicas", "replicas", "Deny")},
		obj: deployment("shop", "web", nil), want: map[string]string{"replicas": "fail"},
		wantMsg: "ValidatingAdmissionPolicy 'replicas' with binding 'replicas' denied request: replicas 1 > 0",
	}, {
		name: "a policy of updates only is judged as an update", policies: []string{`
metadata: {name: updates}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [UPDATE]}]
  validations:
  - expression: "oldObject != null && object.metadata.name == oldObject.metadata.name"
`}, bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("updates", "updates", "Deny")},
		obj: deployment("shop", "web", nil), want: map[string]string{"updates": "pass"},
	}, {
		name: "paramKind: skipped, not evaluated", policies: []string{teamPolicy + `
  paramKind: {apiVersion: v1, kind: ConfigMap}
`}, bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("vap-team", "vap-team", "Deny")},
		obj: deployment("shop", "web", nil), want: map[string]string{}, wantSkips: 1,
	}, {
		name: "another resource type is not matched", policies: []string{teamPolicy},
		bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("vap-team", "vap-team", "Deny")},
		obj: func() *unstructured.Unstructured {
			o := deployment("shop", "web", nil)
			o.SetAPIVersion("v1")
			o.SetKind("ConfigMap")
			return o
		}(), want: map[string]string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var policies []*admissionregistrationv1.ValidatingAdmissionPolicy
			for _, y := range tc.policies {
				policies = append(policies, policy(t, y))
			}
			nss := append([]*corev1.Namespace{namespace("shop", nil)}, tc.namespaces...)
			set, skipped := NewSet(SetInput{Policies: policies, Bindings: tc.bindings, Namespaces: nss, AllNamespaces: true,
				Since: map[string]time.Time{"vap-team": since}})
			if len(skipped) != tc.wantSkips {
				t.Errorf("skipped %v, want %d", skipped, tc.wantSkips)
			}
			gvr := deployments
			if tc.obj.GetKind() == "ConfigMap" {
				gvr = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			}
			d, err := set.Evaluate(context.Background(), tc.obj, gvr)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			if d != nil {
				for i := range d.Policies {
					pc := &d.Policies[i]
					r := "pass"
					if pc.Counts.Fail > 0 {
						r = "fail"
					}
					got[pc.Policy().Name] = r
					if k := pc.Policy(); k != Key(k.Name) {
						t.Errorf("key %+v, want engine Kubernetes, kind %s", k, Kind)
					}
				}
				if d.Resource.UID != tc.obj.GetUID() || d.Resource.Kind != tc.obj.GetKind() {
					t.Errorf("resource %+v", d.Resource)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("results %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("results %v, want %v", got, tc.want)
				}
			}
			var msg string
			if d != nil && len(d.Violations) > 0 {
				msg = d.Violations[0].Message
				if v := d.Violations[0]; v.Policy.Name == "vap-team" && !v.Time.Equal(since) {
					t.Errorf("violation time %v, want %v", v.Time, since)
				}
			}
			if msg != tc.wantMsg {
				t.Errorf("message %q, want %q", msg, tc.wantMsg)
			}
		})
	}
}

// An object in a namespace not listed is not judged without a client to read it.
func TestSetUnknownNamespace(t *testing.T) {
	set, _ := NewSet(SetInput{Policies: []*admissionregistrationv1.ValidatingAdmissionPolicy{policy(t, teamPolicy)},
		Bindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("vap-team", "vap-team", "Deny")}, AllNamespaces: true})
	if _, err := set.Evaluate(context.Background(), deployment("elsewhere", "web", nil), deployments); err == nil {
		t.Fatal("judged an object of a namespace not listed")
	}
}
