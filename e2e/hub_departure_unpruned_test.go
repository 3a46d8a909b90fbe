package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
)

// A cluster removed from the gateway before the declarations on it does not hold them hostage:
// a FleetPolicy deleted afterwards finishes deleting, with a Warning Event naming the cluster it
// could not prune and why, and so does the hub namespace of an ApplicationPolicy placed there
// (the fleet's namespace controller deletes it once the hub lets the ApplicationPolicy go).
func TestHubLetsDeclarationsGoOfDepartedClusters(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const left, tenant = "left-early", "left-early-team"
	hub := directClient(t, fleetOf(t).Hub.Config)
	cluster2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)

	// "left-early" is cluster-2 under another name (its credential Secret holds cluster-2's).
	real := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: fleetOf(t).SecretNamespace, Name: "cluster-2"}, real); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: left, Namespace: fleetOf(t).SecretNamespace,
			Labels: map[string]string{gateway.CredentialTypeLabel: real.Labels[gateway.CredentialTypeLabel]}},
		Type: real.Type, Data: real.Data,
	}
	if err := hub.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), secret) })

	fp := &policyhubv1.FleetPolicy{}
	if err := yaml.Unmarshal([]byte(`
metadata: {name: e2e-left-early}
spec:
  placement: {clusters: [left-early]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("left-early")), fp); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, fp); err != nil {
		t.Fatal(err)
	}
	createNamespace(ctx, t, cluster2, tenant)
	tenantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}
	if err := hub.Create(ctx, tenantNS); err != nil {
		t.Fatal(err)
	}
	grant := &policyhubv1.TenantGrant{ObjectMeta: metav1.ObjectMeta{Name: "e2e-left-early"}, Spec: policyhubv1.TenantGrantSpec{
		Tenants: []string{tenant}, Clusters: policyhubv1.Placement{Clusters: []string{left}}}}
	if err := hub.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), grant) })
	ap := &policyhubv1.ApplicationPolicy{}
	if err := yaml.Unmarshal([]byte(teamApplicationPolicy("left-early", tenant, "Audit", left)), ap); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, ap); err != nil {
		t.Fatal(err)
	}
	// What the hub wrote into cluster-2 under the other name stays there: removed by the test.
	t.Cleanup(func() {
		policy := &unstructured.Unstructured{}
		policy.SetGroupVersionKind(clusterPolicyGVK)
		policy.SetName(fp.Name)
		_ = cluster2.Delete(context.Background(), policy)
		namespaced := &unstructured.Unstructured{}
		namespaced.SetAPIVersion("kyverno.io/v1")
		namespaced.SetKind("Policy")
		namespaced.SetNamespace(tenant)
		namespaced.SetName(ap.Name)
		_ = cluster2.Delete(context.Background(), namespaced)
	})
	waitFleetPolicy(t, fp.Name, "synced in the cluster", wantPhases(map[string]policyhubv1.ClusterPhase{left: "Synced"}))
	waitApplicationPolicy(t, tenant, ap.Name, 60*time.Second, "synced in the cluster", apPhases(map[string]policyhubv1.ClusterPhase{left: "Synced"}))

	// The cluster leaves the fleet first; then its declarations are deleted.
	if err := hub.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := hub.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if err := hub.Delete(ctx, tenantNS); err != nil {
		t.Fatal(err)
	}
	gone(ctx, t, hub, fp, "the FleetPolicy")
	gone(ctx, t, hub, tenantNS, "the ApplicationPolicy's namespace")
	eventually(t, 30*time.Second, 300*time.Millisecond, "a Warning Event saying what was not pruned", func() error {
		list := &eventsv1.EventList{}
		if err := hub.List(ctx, list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == fp.Name && e.Type == corev1.EventTypeWarning && e.Reason == "NotPruned" && strings.Contains(e.Note, left) && strings.Contains(e.Note, "left the fleet") {
				return nil
			}
		}
		return fmt.Errorf("no NotPruned Event among %d", len(list.Items))
	})
}
