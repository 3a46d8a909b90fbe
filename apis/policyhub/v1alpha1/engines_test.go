package v1alpha1

import (
	"slices"
	"testing"
)

// A policy's engine is told by its kind's API group; nothing else names one.
func TestEngineOfAPIVersion(t *testing.T) {
	for apiVersion, want := range map[string]PolicyEngine{
		"kyverno.io/v1": EngineKyverno, "policies.kyverno.io/v1": EngineKyverno,
		"admissionregistration.k8s.io/v1": EngineKubernetes,
		"templates.gatekeeper.sh/v1":      EngineGatekeeper, "constraints.gatekeeper.sh/v1beta1": EngineGatekeeper,
		"v1": "", "apps/v1": "", "": "", "kyverno.io": "", "mutations.gatekeeper.sh/v1": "",
	} {
		got, ok := EngineOfAPIVersion(apiVersion)
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q, %v; want %q", apiVersion, got, ok, want)
		}
	}
}

// Engines are listed once each, in PolicyEngines' order, whatever the order they were found in.
func TestAddEngine(t *testing.T) {
	var e EngineInfo
	for _, engine := range []PolicyEngine{EngineGatekeeper, EngineKyverno, EngineGatekeeper, EngineKubernetes} {
		e.AddEngine(engine)
	}
	if want := PolicyEngines(); !slices.Equal(e.Engines, want) {
		t.Errorf("%v, want %v", e.Engines, want)
	}
}

// Which results an engine counts: Kyverno's as its --allowedResults say, the agent's evaluation of
// Kubernetes admission policies every kind, Gatekeeper's audit fail only.
func TestPolicyEngineReportsResult(t *testing.T) {
	failOnly := &EngineInfo{Kyverno: &KyvernoFacts{ReportedResults: []string{"fail"}}}
	for _, tc := range []struct {
		engine PolicyEngine
		info   *EngineInfo
		result string
		want   bool
	}{
		{"", nil, "pass", true},
		{EngineKyverno, failOnly, "pass", false},
		{"", failOnly, "fail", true},
		{EngineKubernetes, failOnly, "pass", true},
		{EngineGatekeeper, nil, "pass", false},
		{EngineGatekeeper, nil, "fail", true},
		{EngineGatekeeper, nil, "error", false},
	} {
		if got := tc.engine.ReportsResult(tc.info, tc.result); got != tc.want {
			t.Errorf("%q %s with %+v: %v, want %v", tc.engine, tc.result, tc.info, got, tc.want)
		}
	}
}
