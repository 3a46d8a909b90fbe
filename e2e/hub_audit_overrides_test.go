package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An Audit FleetPolicy does not enforce, whatever its template's overrides say: a template whose
// rule enforces in one namespace through failureActionOverrides (and the policy-wide
// validationFailureActionOverrides) reaches the cluster with no enforcing override left, and the
// cluster's Kyverno admits the violating Deployment there once the policy is in force.
func TestAuditModeLeavesNoEnforcement(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "audit-overrides"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)
	tmpl := latestTagPolicy(t, "e2e-audit-overrides", ns, "Enforce")
	rules, _, _ := unstructured.NestedSlice(tmpl.Object, "spec", "rules")
	rules[0].(map[string]any)["validate"].(map[string]any)["failureActionOverrides"] = []any{map[string]any{"action": "Enforce", "namespaces": []any{ns}}}
	_ = unstructured.SetNestedSlice(tmpl.Object, rules, "spec", "rules")
	_ = unstructured.SetNestedSlice(tmpl.Object, []any{map[string]any{"action": "Enforce", "namespaces": []any{ns}}}, "spec", "validationFailureActionOverrides")
	fp := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-audit-overrides}
spec:
  placement: {clusters: [cluster-1]}
  mode: Audit
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, marshalJSON(tmpl.Object["spec"])))
	waitFleetPolicy(t, fp.Name, "synced and in force", func(fp *fleetView) error {
		if err := wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"})(fp); err != nil {
			return err
		}
		if c := fp.Clusters[0]; c.InForce == nil || !*c.InForce {
			return fmt.Errorf("not in force yet")
		}
		return nil
	})

	live, err := liveObject(t, "cluster-1", tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if text := string(marshalJSON(live.Object["spec"])); strings.Contains(text, `"Enforce"`) || strings.Contains(text, `"enforce"`) {
		t.Errorf("the Audit policy in the cluster still enforces somewhere: %s", text)
	}
	// Kyverno has the policy in force; a violating Deployment is admitted (audited), every time.
	latest := deployment(ns, "web-latest", "nginx:latest")
	for i := 0; i < 5; i++ {
		if err := cluster.Create(ctx, latest.DeepCopy(), client.DryRunAll); err != nil {
			t.Fatalf("an Audit policy refused nginx:latest in %s: %v", ns, err)
		}
		time.Sleep(time.Second)
	}
}
