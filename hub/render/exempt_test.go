package render

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// A cluster-wide policy that could match the hub's sync Lease or its Namespace is rendered with
// both excluded, so no shipped policy can lock the hub out; one that cannot match them (a Pod
// policy, whose rules Kyverno generates for controllers only without named excludes) is untouched.
func TestExemptHub(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		exempted bool
	}{
		{"labels on every kind", `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: p}, spec: {rules: [{name: r, match: {any: [{resources: {kinds: ["*"]}}]}, validate: {deny: {}}}]}}`, true},
		{"namespaces, exclude.any kept", `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: p}, spec: {rules: [{name: r, match: {any: [{resources: {kinds: [Namespace]}}]}, exclude: {any: [{resources: {names: [kube-*]}}]}, validate: {deny: {}}}]}}`, true},
		{"leases, exclude.all of one", `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: p}, spec: {rules: [{name: r, match: {all: [{resources: {kinds: [coordination.k8s.io/v1/Lease]}}]}, exclude: {all: [{resources: {names: [x]}}]}, validate: {deny: {}}}]}}`, true},
		{"pods untouched", `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: p}, spec: {rules: [{name: r, match: {any: [{resources: {kinds: [Pod]}}]}, validate: {deny: {}}}]}}`, false},
		{"namespaced Policy untouched", `{apiVersion: kyverno.io/v1, kind: Policy, metadata: {name: p, namespace: shop}, spec: {rules: [{name: r, match: {any: [{resources: {kinds: ["*"]}}]}, validate: {deny: {}}}]}}`, false},
		{"ValidatingPolicy on everything", `{apiVersion: policies.kyverno.io/v1, kind: ValidatingPolicy, metadata: {name: p}, spec: {matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], resources: ["*"], operations: [CREATE]}]}}}`, true},
		{"ValidatingPolicy on deployments untouched", `{apiVersion: policies.kyverno.io/v1, kind: ValidatingPolicy, metadata: {name: p}, spec: {matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}]}}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tt.in), &obj.Object); err != nil {
				t.Fatal(err)
			}
			before := mustYAML(t, []*unstructured.Unstructured{obj.DeepCopy()})
			if err := ExemptHub(obj); err != nil {
				t.Fatal(err)
			}
			after := mustYAML(t, []*unstructured.Unstructured{obj})
			exempted := strings.Contains(after, "policyhub-sync") && strings.Contains(after, "policyhub-system")
			if exempted != tt.exempted {
				t.Fatalf("exempted %v, want %v:\n%s", exempted, tt.exempted, after)
			}
			if !tt.exempted && before != after {
				t.Errorf("changed:\n%s", after)
			}
			// What the template excluded stays excluded.
			for _, kept := range []string{"kube-*", "- x"} {
				if strings.Contains(before, kept) && !strings.Contains(after, kept) {
					t.Errorf("the template's exclude %q was lost:\n%s", kept, after)
				}
			}
		})
	}
}
