package e2e

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Audit through a KubeVela Application: shop's violation in cluster-1 shows in the Application's
// status.policy entry (per cluster), and another application's Deployment adds nothing.
func TestKubeVelaApplicationStatusShowsViolations(t *testing.T) {
	inLane(t, "kubevela")
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns = "kv-status"
	hub := directClient(t, fleetOf(t).Hub.Config)
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, c1, ns)
	applyKubeVelaDefinitions(ctx, t, hub)
	app := object(t, fmt.Sprintf(velaShop, ns))
	// The topology: cluster-1 only.
	policies, _, _ := unstructured.NestedSlice(app.Object, "spec", "policies")
	policies[1].(map[string]any)["properties"] = map[string]any{"clusters": []any{"cluster-1"}}
	if err := unstructured.SetNestedSlice(app.Object, policies, "spec", "policies"); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(ctx, app) })
	waitApplicationPolicy(t, ns, policyhubv1.KubeVelaEntryName("shop", "team"), 90*time.Second, "synced in cluster-1", apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	blog := shopDeployment(ns, "blog", "")
	blog.Labels["app.oam.dev/name"] = "blog"
	for _, d := range []*appsv1.Deployment{shopDeployment(ns, "web", ""), blog} {
		if err := c1.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	eventually(t, 3*time.Minute, time.Second, "shop's violation in the Application's status.policy entry", func() error {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
			return err
		}
		policies, _, _ := unstructured.NestedSlice(live.Object, "status", "policy")
		for _, p := range policies {
			m, _ := p.(map[string]any)
			if m["name"] != "team" {
				continue
			}
			status, _ := m["status"].(map[string]any)
			byCluster, _ := status["violationsByCluster"].(map[string]any)
			// One violating shop Deployment: blog's is not the application's.
			if status["violations"] == int64(1) && byCluster["cluster-1"] == int64(1) {
				return nil
			}
			return fmt.Errorf("entry status %v", status)
		}
		return fmt.Errorf("no entry: %v", policies)
	})
}
