package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ruleField reads a field of the first rule of the ClusterPolicy named name in a cluster.
func ruleField(t *testing.T, cluster, name string, path ...string) string {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(clusterPolicyGVK)
	obj.SetName(name)
	live, err := liveObject(t, cluster, obj)
	if err != nil {
		return "(absent: " + err.Error() + ")"
	}
	rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
	if len(rules) == 0 {
		return "(no rules)"
	}
	v, _, _ := unstructured.NestedString(rules[0].(map[string]any), path...)
	return v
}

// A template change reaches every selected cluster, and so does a mode override (Enforce, then
// Audit), rewritten into the rule's validate.failureAction.
func TestHubPropagatesTemplateAndModeChanges(t *testing.T) {
	inParallel(t)
	startHub(t, 10*time.Minute)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-template}
spec:
  mode: Enforce
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("template"))
	both := map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}
	waitFleetPolicy(t, fp.Name, "synced in both", wantPhases(both))
	for _, c := range []string{"cluster-1", "cluster-2"} {
		if got := ruleField(t, c, fp.Name, "validate", "failureAction"); got != "Enforce" {
			t.Errorf("%s: failureAction %q, want Enforce (the mode override)", c, got)
		}
	}

	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) {
		audit := policyhubv1.ModeAudit
		fp.Spec.Mode = &audit
		spec := map[string]any{}
		_ = unmarshalJSON(fp.Spec.Template.Spec.Raw, &spec)
		rules := spec["rules"].([]any)
		rules[0].(map[string]any)["validate"].(map[string]any)["message"] = "configmaps need an owner label (v2)"
		fp.Spec.Template.Spec.Raw = marshalJSON(spec)
	})
	waitFleetPolicy(t, fp.Name, "the change synced in both", wantPhases(both))
	eventually(t, 30*time.Second, 200*time.Millisecond, "mode and message changed in both clusters", func() error {
		for _, c := range []string{"cluster-1", "cluster-2"} {
			action := ruleField(t, c, fp.Name, "validate", "failureAction")
			msg := ruleField(t, c, fp.Name, "validate", "message")
			if action != "Audit" || msg != "configmaps need an owner label (v2)" {
				return fmt.Errorf("%s: failureAction %q, message %q", c, action, msg)
			}
		}
		return nil
	})
}
