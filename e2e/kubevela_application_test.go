package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

const velaShop = `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: shop, namespace: %s}
spec:
  components: []
  policies:
  - name: team
    type: kyverno-policy
    properties:
      mode: Audit
      scope: {kinds: [Deployment]}
      rules:
      - name: need-team
        validate: {message: "shop Deployments need a team label", pattern: {metadata: {labels: {team: "?*"}}}}
  - name: everywhere
    type: topology
    properties: {clusterLabelSelector: {kv-lifecycle: "yes"}}
`

// A KubeVela Application with a kyverno-policy entry and a topology by clusterLabelSelector that
// selects cluster-1 and cluster-2: the entry's Policy reaches both clusters; the Application's
// status.policy gets the entry's compact status, and is not written again while nothing changes;
// removing the entry prunes both clusters.
func TestKubeVelaApplicationPolicyLifecycle(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "kv-lifecycle"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	applyKubeVelaDefinitions(ctx, t, hub)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
		// The topology selects the clusters by this label, put on both for the test.
		labels := maps.Clone(fleetOf(t).Cluster(c).Labels)
		labels["kv-lifecycle"] = "yes"
		if err := fleetOf(t).SetClusterLabels(ctx, c, labels); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			delete(labels, "kv-lifecycle")
			if err := fleetOf(t).SetClusterLabels(context.Background(), c, labels); err != nil {
				t.Errorf("restore %s's labels: %v", c, err)
			}
		})
	}
	app := object(t, fmt.Sprintf(velaShop, ns))
	if err := hub.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(ctx, app) })

	waitApplicationPolicy(t, ns, policyhubv1.KubeVelaEntryName("shop", "team"), 90*time.Second, "the entry's ApplicationPolicy synced in both clusters",
		apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	for _, c := range []string{"cluster-1", "cluster-2"} {
		if got := ownedPolicies(t, c, "kyverno.io/v1", "Policy", ns); fmt.Sprint(got) != "["+policyhubv1.KubeVelaEntryName("shop", "team")+"]" {
			t.Errorf("%s holds %v, want the entry's policy", c, got)
		}
	}

	// The entry's status in the Application, and how many times it is written.
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	entryStatus := func() (map[string]any, error) { return velaEntryStatus(ctx, hub, app, live, "team") }
	eventually(t, 60*time.Second, 300*time.Millisecond, "the entry's status in the Application", func() error {
		status, err := entryStatus()
		if err != nil {
			return err
		}
		if status["synced"] != int64(2) || status["ready"] != true {
			return fmt.Errorf("status %v", status)
		}
		return nil
	})
	// vela-core's own status is intact: its policies were applied (the entry's output among them).
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	policyApplied := false
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Policy" && m["status"] == "True" {
			policyApplied = true
		}
	}
	if !policyApplied {
		t.Errorf("vela-core's Policy condition is not True: %v", conditions)
	}
	version := live.GetResourceVersion()
	// Reconciles with nothing new (requested through an annotation, as a resync would): no write.
	for i := range 3 {
		ap := &policyhubv1.ApplicationPolicy{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: policyhubv1.KubeVelaEntryName("shop", "team")}, ap); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(ap.DeepCopy())
		ap.Annotations["e2e/requested"] = fmt.Sprint(i)
		if err := hub.Patch(ctx, ap, patch); err != nil {
			t.Fatal(err)
		}
		waitApplicationPolicy(t, ns, policyhubv1.KubeVelaEntryName("shop", "team"), 30*time.Second, "reconciled", func(ap *appView) error {
			if ap.Status.Summary.Synced != 2 {
				return fmt.Errorf("summary %+v", ap.Status.Summary)
			}
			return nil
		})
	}
	if _, err := entryStatus(); err != nil {
		t.Fatal(err)
	}
	if live.GetResourceVersion() != version {
		t.Errorf("the Application was written while nothing changed (resourceVersion %s → %s)", version, live.GetResourceVersion())
	}

	// Remove the entry: its ApplicationPolicy goes, and with it the Policies in both clusters.
	updateVelaApplication(t, hub, ns, app.GetName(), func(app *unstructured.Unstructured) {
		policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
		if err := unstructured.SetNestedSlice(app.Object, policies[1:], "spec", "policies"); err != nil {
			t.Fatal(err)
		}
	})
	eventually(t, 90*time.Second, 500*time.Millisecond, "the Policies pruned from both clusters", func() error {
		for _, c := range []string{"cluster-1", "cluster-2"} {
			if got := ownedPolicies(t, c, "kyverno.io/v1", "Policy", ns); len(got) != 0 {
				return fmt.Errorf("%s still holds %v", c, got)
			}
		}
		return nil
	})
}
