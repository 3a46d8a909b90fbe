package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKyvernoEnforcesLegacy(t *testing.T) {
	for _, tc := range []struct {
		version         string
		enforces, known bool
	}{
		{"v1.16.3", true, true},
		{"v1.19.1", true, true},
		{"1.19.0", true, true},
		{"v1.20.0", false, true},
		{"v1.20.0-rc.1", false, true},
		{"v1.21", false, true},
		{"", false, false},
		{"latest", false, false},
		{"v2.0.0", false, false},
		{"v1.x", false, false},
	} {
		enforces, known := KyvernoEnforcesLegacy(tc.version)
		if enforces != tc.enforces || known != tc.known {
			t.Errorf("KyvernoEnforcesLegacy(%q) = %v, %v; want %v, %v", tc.version, enforces, known, tc.enforces, tc.known)
		}
	}
}

func TestIsLegacyKind(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "kyverno.io", Kind: "ClusterPolicy"}:             true,
		{Group: "kyverno.io", Kind: "PolicyException"}:           true,
		{Group: "kyverno.io", Kind: "CleanupPolicy"}:             true,
		{Group: "kyverno.io", Kind: "UpdateRequest"}:             false,
		{Group: "policies.kyverno.io", Kind: "PolicyException"}:  false,
		{Group: "policies.kyverno.io", Kind: "ValidatingPolicy"}: false,
	} {
		if got := IsLegacyKind(gk); got != want {
			t.Errorf("IsLegacyKind(%v) = %v, want %v", gk, got, want)
		}
	}
}

func TestIsKyvernoLegacyRefusal(t *testing.T) {
	for msg, want := range map[string]bool{
		`admission webhook "validate-policy.kyverno.svc" denied the request: ClusterPolicy (kyverno.io) execution was removed in v1.20; the API remains available: use policies.kyverno.io/v1 ValidatingPolicy`: true,
		`clusterpolicies.kyverno.io "x" is forbidden: ValidatingAdmissionPolicy 'kyverno-1-20' denied request: legacy policy APIs are read-only`:                                                                true,
		`admission webhook "validate-policy.kyverno.svc" denied the request: spec.rules[0]: invalid`:                                                                                                            false,
		`ClusterPolicy (kyverno.io) is deprecated and will be removed in v1.20`:                                                                                                                                 false,
		`admission webhook "x" denied the request: spec invalid; ClusterPolicy (kyverno.io) is deprecated and will be removed in v1.20`:                                                                         false,
	} {
		if got := IsKyvernoLegacyRefusal(msg); got != want {
			t.Errorf("IsKyvernoLegacyRefusal(%q) = %v, want %v", msg, got, want)
		}
	}
}

// Only Kyverno 1.19.0 (its pre-releases and builds included) honours exceptions outside
// --exceptionNamespace; 1.19.1, other versions and an unknown one carry no warning.
func TestKyvernoExceptionBypass(t *testing.T) {
	for version, affected := range map[string]bool{
		"v1.19.0": true, "1.19.0": true, "v1.19.0-rc.2": true, "v1.19.0+build.1": true,
		"v1.19.1": false, "v1.19.10": false, "v1.190.0": false, "v1.16.3": false, "v1.20.0": false, "": false, "main": false,
	} {
		if got := KyvernoExceptionBypass(version) != ""; got != affected {
			t.Errorf("%q: affected %v, want %v", version, got, affected)
		}
	}
	if !strings.Contains(KyvernoExceptionBypass("v1.19.0"), "kyverno#17367") {
		t.Error("the warning does not name the issue")
	}
}
