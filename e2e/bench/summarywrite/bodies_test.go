package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestBodies(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	fullApply, fullPatch, err := agentBodies("bench-000", fullSpec(50, 10, 1, at), at)
	if err != nil {
		t.Fatal(err)
	}
	_, failPatch, err := agentBodies("bench-000", failOnlySpec(50, 1), at)
	if err != nil {
		t.Fatal(err)
	}
	_, nextPatch, err := agentBodies("bench-000", fullSpec(50, 10, 2, at), at)
	if err != nil {
		t.Fatal(err)
	}
	if string(nextPatch) == string(fullPatch) {
		t.Error("two rounds' patches are the same: the writes would not change the object")
	}
	for _, absent := range []string{`"pass":1`, `"warn":1`, `"skip":1`, `"violations"`, `"title"`} {
		if strings.Contains(string(failPatch), absent) {
			t.Errorf("the fail-only patch holds %s", absent)
		}
	}
	if !strings.Contains(string(fullPatch), `"violations"`) {
		t.Error("the full patch holds no violations")
	}
	if len(failPatch)*2 > len(fullPatch) {
		t.Errorf("fail-only patch %d bytes, full %d: expected less than half", len(failPatch), len(fullPatch))
	}
	bench, err := withAPIVersion(fullApply, benchGroup+"/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(bench, &obj); err != nil || obj["apiVersion"] != benchGroup+"/v1alpha1" {
		t.Errorf("retargeted apply: apiVersion %v, err %v", obj["apiVersion"], err)
	}
	spec, err := specJSON(fullApply)
	if err != nil || !strings.HasPrefix(spec, "{") || !strings.Contains(spec, `"policies"`) {
		t.Errorf("specJSON: %.40q, %v", spec, err)
	}
	if _, err := specJSON([]byte(`{"kind":"X"}`)); err == nil {
		t.Error("specJSON of a body with no spec: no error")
	}
}

func TestWithoutValidations(t *testing.T) {
	tests := []struct {
		name, in string
		removed  int
	}{
		{"none", `{"type":"object","properties":{"a":{"type":"string"}}}`, 0},
		{"top", `{"x-kubernetes-validations":[{"rule":"true"}],"type":"object"}`, 1},
		{"nested in maps and lists", `{"versions":[{"schema":{"x-kubernetes-validations":[],"properties":{"s":{"x-kubernetes-validations":[{"rule":"x"}]}}}}]}`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tt.in), &v); err != nil {
				t.Fatal(err)
			}
			if got := withoutValidations(v); got != tt.removed {
				t.Errorf("removed %d, want %d", got, tt.removed)
			}
			out, _ := json.Marshal(v)
			if strings.Contains(string(out), "x-kubernetes-validations") {
				t.Errorf("left: %s", out)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := options{writes: 500, namespaces: 100, parallel: 8, policies: 50, violations: 10}
	if err := ok.validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	for name, o := range map[string]options{
		"parallel not below namespaces": {writes: 500, namespaces: 8, parallel: 8, policies: 50},
		"no writes":                     {writes: 0, namespaces: 100, parallel: 8, policies: 50},
		"violations over maxItems":      {writes: 500, namespaces: 100, parallel: 8, policies: 50, violations: 201},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
