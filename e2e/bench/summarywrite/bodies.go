package main

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// fullSpec is a summary of policies Kyverno policies with violations failing results listed, as
// an agent would push in the busy fleet: every count kept, the policies' descriptions, the engine
// facts. round moves one policy's fail count, so every write of a run is a change.
func fullSpec(policies, violations, round int, at time.Time) policyhubv1.PolicyReportSummarySpec {
	spec := policyhubv1.PolicyReportSummarySpec{
		ContentHash: fmt.Sprintf("%064x", round),
		Engine: policyhubv1.EngineInfo{
			ReportAPIs:      []string{"wgpolicyk8s.io/v1alpha2"},
			KyvernoWebhooks: true,
			PolicyAPIs:      []string{"kyverno.io/v1"},
			Kyverno:         &policyhubv1.KyvernoFacts{Version: "v1.16.2", VersionSource: "Deployment"},
		},
	}
	for j := range policies {
		res := policyhubv1.ResultCounts{Pass: int64(120 + j), Fail: int64(1 + (j+round)%7), Warn: int64(j % 3), Skip: int64(j % 2)}
		spec.Policies = append(spec.Policies, policyhubv1.PolicySummary{
			Name: policyName(j), Kind: "ClusterPolicy", Engine: policyhubv1.EngineKyverno,
			Title: fmt.Sprintf("Require labels and limits (%02d)", j), Category: "Best Practices", Severity: "medium",
			Results: res,
		})
		spec.Totals.Pass += res.Pass
		spec.Totals.Fail += res.Fail
		spec.Totals.Warn += res.Warn
		spec.Totals.Skip += res.Skip
	}
	stamp := metav1.NewTime(at.Truncate(time.Second))
	for v := range violations {
		spec.Violations = append(spec.Violations, policyhubv1.Violation{
			Policy: policyName(v % max(policies, 1)), Rule: "check-labels", Result: "fail", Severity: "medium",
			Resource:  policyhubv1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: fmt.Sprintf("team-%02d", v), Name: fmt.Sprintf("checkout-api-%02d", v)},
			Message:   "validation error: label 'app.kubernetes.io/name' is required. rule check-labels failed at path /metadata/labels/app.kubernetes.io/name/",
			Timestamp: &stamp,
		})
	}
	return spec
}

// failOnlySpec is the busy path's smaller summary of the same policies: each policy's identity
// and its fail, error and blocked counts only (no pass, warn or skip, no descriptions, no
// violations, no engine facts): what would change every 10 s when pods churn.
func failOnlySpec(policies, round int) policyhubv1.PolicyReportSummarySpec {
	spec := policyhubv1.PolicyReportSummarySpec{ContentHash: fmt.Sprintf("%064x", round)}
	for j := range policies {
		res := policyhubv1.ResultCounts{Fail: int64(1 + (j+round)%7), Error: int64(j % 2)}
		blocked := int64(j % 4)
		spec.Policies = append(spec.Policies, policyhubv1.PolicySummary{Name: policyName(j), Kind: "ClusterPolicy", Results: res, Blocked: blocked})
		spec.Totals.Fail += res.Fail
		spec.Totals.Error += res.Error
		spec.Blocked += blocked
	}
	return spec
}

func policyName(j int) string { return fmt.Sprintf("require-labels-and-limits-%02d", j) }

// agentBodies are what the agent of cluster sends to write spec (push.SummaryBodies): the apply
// of the whole summary and the JSON patch replacing its spec.
func agentBodies(cluster string, spec policyhubv1.PolicyReportSummarySpec, at time.Time) (apply, patch []byte, err error) {
	return push.SummaryBodies(cluster, push.DefaultHeartbeat, spec, at)
}

// withAPIVersion is the apply body of a summary retargeted at another group's copy of the CRD.
func withAPIVersion(apply []byte, apiVersion string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(apply, &obj); err != nil {
		return nil, fmt.Errorf("decode the apply body: %w", err)
	}
	obj["apiVersion"] = apiVersion
	return json.Marshal(obj)
}

// specJSON is the spec an apply body carries, as JSON: what a ConfigMap holds in shape f.
func specJSON(apply []byte) (string, error) {
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(apply, &obj); err != nil {
		return "", fmt.Errorf("decode the apply body: %w", err)
	}
	if len(obj.Spec) == 0 {
		return "", fmt.Errorf("the apply body has no spec")
	}
	return string(obj.Spec), nil
}

// configMapPatch is a JSON patch replacing a ConfigMap's data with one key holding value, the
// same verb as the agent's summary patch.
func configMapPatch(value string) ([]byte, error) {
	return json.Marshal([]map[string]any{{"op": "replace", "path": "/data", "value": map[string]string{configMapKey: value}}})
}

const configMapKey = "summary.json"

// statusPatch is the hub's merge patch of a summary's status after it judged a new generation
// (hub/controllers/summary_controller.go): observedGeneration, observedTime and the Ready
// condition. The hub also sends the resourceVersion it read (an optimistic lock); this patch
// does not, so no write of the run is refused.
func statusPatch(generation int64, at time.Time, policies int, fail int64) ([]byte, error) {
	return json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration": generation,
		"observedTime":       metav1.NewMicroTime(at).Format(metav1.RFC3339Micro),
		"conditions": []map[string]any{{
			"type": policyhubv1.ConditionReady, "status": "True", "observedGeneration": generation,
			"lastTransitionTime": at.UTC().Format(time.RFC3339), "reason": "Aggregated",
			"message": fmt.Sprintf("aggregated: %d policies, %d fail, %d error", policies, fail, 0),
		}},
	}})
}

// leasePatch is an agent's Lease renewal after its first apply: a merge patch of renewTime.
func leasePatch(at time.Time) []byte {
	return fmt.Appendf(nil, `{"spec":{"renewTime":%q}}`, metav1.NewMicroTime(at).Format(metav1.RFC3339Micro))
}

// withoutValidations removes every x-kubernetes-validations (CEL rule) from a CRD object, in
// place, at any depth, and returns how many it removed.
func withoutValidations(v any) int {
	removed := 0
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["x-kubernetes-validations"]; ok {
			delete(t, "x-kubernetes-validations")
			removed++
		}
		for _, child := range t {
			removed += withoutValidations(child)
		}
	case []any:
		for _, child := range t {
			removed += withoutValidations(child)
		}
	}
	return removed
}

// atomicSpec makes a CRD object's every version's spec one atomic value to field management
// (x-kubernetes-map-type: atomic, what +structType=atomic generates): its schema and CEL rules
// are kept, but managedFields record spec whole instead of every field of every list entry.
func atomicSpec(crd map[string]any) error {
	return eachVersionRoot(crd, func(_, properties map[string]any) error {
		spec, _ := properties["spec"].(map[string]any)
		if spec == nil {
			return fmt.Errorf("no spec schema")
		}
		spec["x-kubernetes-map-type"] = "atomic"
		return nil
	})
}

// eachVersionRoot calls edit with the openAPIV3Schema (root) and its properties of each version
// of a CRD object.
func eachVersionRoot(crd map[string]any, edit func(root, properties map[string]any) error) error {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) == 0 {
		return fmt.Errorf("the CRD has no versions")
	}
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		properties, _ := root["properties"].(map[string]any)
		if properties == nil {
			return fmt.Errorf("version %v has no openAPIV3Schema properties", version["name"])
		}
		if err := edit(root, properties); err != nil {
			return fmt.Errorf("version %v: %w", version["name"], err)
		}
	}
	return nil
}

// schemaless makes a CRD object's every version keep spec and status without a schema
// (x-kubernetes-preserve-unknown-fields) and drops its CEL rules: the apiserver then neither
// validates them nor knows their lists' keys.
func schemaless(crd map[string]any) error {
	return eachVersionRoot(crd, func(root, properties map[string]any) error {
		for _, field := range []string{"spec", "status"} {
			properties[field] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
		delete(root, "x-kubernetes-validations")
		return nil
	})
}
