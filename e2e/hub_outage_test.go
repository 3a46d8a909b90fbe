package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// useOwnFleet starts a fleet for this test alone (no Kyverno: stopping its apiservers must not
// disturb the shared fleet's Kyverno) and points the test's helpers (fleetOf) at it until the
// test ends; the other tests go on with the shared fleet.
func useOwnFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("useOwnFleet is for top-level tests: their subtests share the fleet")
	}
	own := fleet.StartForTest(t, fleet.Options{})
	ownFleets.Store(t.Name(), own)
	t.Cleanup(func() { ownFleets.Delete(t.Name()) })
	return own
}

// A cluster whose apiserver is down is Failed with the reason while the other cluster takes the
// change; once it is back it catches up without anyone doing anything. Deleting the FleetPolicy
// while a cluster is down prunes the reachable one, keeps the finalizer and says why; when the
// cluster returns, it is pruned and the FleetPolicy goes.
func TestHubSurvivesAnUnreachableCluster(t *testing.T) {
	inParallel(t)
	own := useOwnFleet(t)
	startHub(t, 2*time.Second)
	ctx := testContext(t)
	hub := directClient(t, own.Hub.Config)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-outage}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("outage"))
	both := map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}
	waitFleetPolicy(t, fp.Name, "synced in both", wantPhases(both))

	down := own.Cluster("cluster-2")
	if err := down.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = down.StartAPIServer(context.Background())
		}
	})
	// A real change: the template's rule audits; the override enforces.
	enforce := policyhubv1.ModeEnforce
	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Mode = &enforce })
	failed := waitFleetPolicy(t, fp.Name, "cluster-2 Failed, cluster-1 Synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Failed"}))
	if msg := failed.Clusters[1].Message; !strings.Contains(msg, "cluster-2") {
		t.Errorf("cluster-2's message does not say what failed: %q", msg)
	}
	if ready := findCondition(failed, policyhubv1.ConditionReady); ready == nil || ready.Status != "False" || ready.Reason != "Failed" {
		t.Errorf("Ready %+v, want False/Failed", ready)
	}
	if got := ruleField(t, "cluster-1", fp.Name, "validate", "failureAction"); got != "Enforce" {
		t.Errorf("cluster-1 did not get the change while cluster-2 was down: failureAction %q", got)
	}

	if err := down.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitFleetPolicy(t, fp.Name, "cluster-2 recovered by itself", wantPhases(both))
	if got := ruleField(t, "cluster-2", fp.Name, "validate", "failureAction"); got != "Enforce" {
		t.Errorf("cluster-2 did not catch up after its restart: failureAction %q", got)
	}

	// Deletion with cluster-2 down: the finalizer holds until cluster-2 is pruned too.
	if err := down.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = false
	if err := hub.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "deletion held back by the unreachable cluster", func() error {
		current, err := fleetPolicyWithClusters(ctx, hub, fp.Name)
		if err != nil {
			return fmt.Errorf("the FleetPolicy went although cluster-2 was not pruned: %v", err)
		}
		ready := findCondition(current, policyhubv1.ConditionReady)
		if ready == nil || ready.Reason != "PruneFailed" {
			return fmt.Errorf("Ready %+v, want reason PruneFailed", ready)
		}
		for _, c := range current.Clusters {
			if c.Name == "cluster-2" && strings.Contains(c.Message, "could not prune") {
				return nil
			}
		}
		return fmt.Errorf("no cluster-2 entry saying it could not be pruned: %+v", current.Clusters)
	})
	// The status says PruneFailed as soon as cluster-2 answered; cluster-1's worker may still be
	// pruning then: it is pruned meanwhile, cluster-2 still down.
	eventually(t, 30*time.Second, 200*time.Millisecond, "cluster-1 pruned while cluster-2 is down", func() error {
		if got := presence(t, fp.Name); got["cluster-1"] {
			return fmt.Errorf("cluster-1 still holds the policy")
		}
		return nil
	})
	if err := down.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 90*time.Second, 200*time.Millisecond, "the FleetPolicy gone once cluster-2 is pruned", func() error {
		err := hub.Get(ctx, client.ObjectKeyFromObject(fp), &policyhubv1.FleetPolicy{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if got := presence(t, fp.Name); got["cluster-2"] {
		t.Errorf("cluster-2 still holds the policy after the FleetPolicy went")
	}
}
