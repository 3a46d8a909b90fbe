package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A policy the hub ships cannot lock the hub out of a cluster: one that requires a label on every
// Lease and Namespace is enforced by the cluster's Kyverno (it refuses such a Lease elsewhere), yet
// the hub, whose every write is made under its own Lease in policyhub-system, still syncs another
// declaration there and then removes the policy itself.
func TestHubPolicyCannotLockTheHubOut(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "lockout-e2e"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)
	blocker := createFleetPolicy(t, `
metadata: {name: e2e-lockout-blocker}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec:
      background: false
      rules:
      - name: every-lease-and-namespace-has-a-team
        match: {any: [{resources: {kinds: [Lease, Namespace], operations: [CREATE, UPDATE]}}]}
        validate:
          failureAction: Enforce
          message: "a team label is required"
          pattern: {metadata: {labels: {team: "?*"}}}
`)
	waitFleetPolicy(t, blocker.Name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "no-team", Namespace: ns}}
	eventually(t, 90*time.Second, time.Second, "Kyverno enforces the blocker", func() error {
		err := cluster.Create(ctx, lease.DeepCopy(), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("a Lease without a team label was admitted")
		}
		if !strings.Contains(err.Error(), "team label is required") {
			return fmt.Errorf("refused for another reason: %v", err)
		}
		return nil
	})

	// The hub writes cluster-1 again, under its Lease: another declaration syncs there.
	other := createFleetPolicy(t, `
metadata: {name: e2e-lockout-other}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("lockout-other"))
	waitFleetPolicy(t, other.Name, "synced despite the blocker", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	// And the hub can take the blocker away.
	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.Delete(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	policy := &unstructured.Unstructured{}
	policy.SetGroupVersionKind(clusterPolicyGVK)
	policy.SetName(blocker.Name)
	gone(ctx, t, cluster, policy, "the blocker in cluster-1")

}
