package work

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func policyWithStatus(apiVersion, kind string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "p"}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestKyvernoReadinessKeptInTheCache(t *testing.T) {
	readyCondition := func(status string) map[string]any {
		return map[string]any{"conditions": []any{
			map[string]any{"type": "Other", "status": "True"},
			map[string]any{"type": "Ready", "status": status, "message": "Ready"},
		}, "autogen": map[string]any{"rules": []any{"big"}}}
	}
	r := newReadiness()
	for _, tc := range []struct {
		name         string
		obj          *unstructured.Unstructured
		ready, known bool
	}{
		{"ClusterPolicy, Ready True", policyWithStatus("kyverno.io/v1", "ClusterPolicy", readyCondition("True")), true, true},
		{"Policy, Ready False", policyWithStatus("kyverno.io/v1", "Policy", readyCondition("False")), false, true},
		{"ClusterPolicy Kyverno has not seen", policyWithStatus("kyverno.io/v1", "ClusterPolicy", nil), false, false},
		{"ValidatingPolicy, ready", policyWithStatus("policies.kyverno.io/v1", "ValidatingPolicy", map[string]any{"conditionStatus": map[string]any{"ready": true}}), true, true},
		{"NamespacedValidatingPolicy, not ready", policyWithStatus("policies.kyverno.io/v1", "NamespacedValidatingPolicy", map[string]any{"conditionStatus": map[string]any{"ready": false, "message": "x"}}), false, true},
		{"ValidatingPolicy without a word yet", policyWithStatus("policies.kyverno.io/v1", "ValidatingPolicy", map[string]any{"conditionStatus": map[string]any{}}), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ready, known := kyvernoReady(tc.obj); ready != tc.ready || known != tc.known {
				t.Fatalf("kyvernoReady = %v, %v; want %v, %v", ready, known, tc.ready, tc.known)
			}
			r.keep(tc.obj)
			status, has := tc.obj.Object["status"]
			if has != tc.known {
				t.Fatalf("status after keep: %v (present %v); want present only when Kyverno said something", status, has)
			}
			if has && len(status.(map[string]any)) != 1 {
				t.Errorf("the cache keeps %v of the status; want only ready", status)
			}
			if cachedReady(tc.obj) != tc.ready {
				t.Errorf("cachedReady = %v, want %v", cachedReady(tc.obj), tc.ready)
			}
		})
	}
}

func TestReportsReadiness(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "kyverno.io", Kind: "ClusterPolicy"}:                     true,
		{Group: "kyverno.io", Kind: "Policy"}:                            true,
		{Group: "kyverno.io", Kind: "PolicyException"}:                   false,
		{Group: "kyverno.io", Kind: "ClusterCleanupPolicy"}:              false,
		{Group: "policies.kyverno.io", Kind: "ValidatingPolicy"}:         true,
		{Group: "policies.kyverno.io", Kind: "NamespacedMutatingPolicy"}: true,
		{Group: "policies.kyverno.io", Kind: "PolicyException"}:          false,
		{Group: "", Kind: "ConfigMap"}:                                   false,
	} {
		if got := reportsReadiness(gk); got != want {
			t.Errorf("reportsReadiness(%v) = %v, want %v", gk, got, want)
		}
	}
}
