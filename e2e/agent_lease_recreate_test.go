package e2e

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An agent whose Lease is deleted on the hub (by an admin cleaning up, or a namespace restored
// from backup) makes it again at its next heartbeat, whole, with its renewals going on: its
// renewals patch renewTime alone, and a patch of a Lease that is gone must not leave the cluster
// silent for good.
func TestAgentMakesItsDeletedLeaseAgain(t *testing.T) {
	const cluster, heartbeat = "cluster-1", time.Second
	runAgent(t, cluster, heartbeat)
	t.Cleanup(func() { deleteSummary(t, cluster) })
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	key := client.ObjectKey{Namespace: cluster, Name: policyhubv1.AgentLeaseName}
	lease := &coordinationv1.Lease{}
	eventually(t, 30*time.Second, 100*time.Millisecond, "the agent's Lease renewed", func() error {
		if err := hub.Get(ctx, key, lease); err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.HolderIdentity == nil {
			return fmt.Errorf("lease %+v", lease.Spec)
		}
		return nil
	})
	if err := hub.Delete(ctx, lease); err != nil {
		t.Fatal(err)
	}
	deleted := lease.UID
	var again *coordinationv1.Lease
	eventually(t, 10*heartbeat, 100*time.Millisecond, "the Lease made again", func() error {
		l := &coordinationv1.Lease{}
		if err := hub.Get(ctx, key, l); err != nil {
			return err
		}
		if l.UID == deleted {
			return fmt.Errorf("still the deleted Lease")
		}
		again = l
		return nil
	})
	if again.Spec.HolderIdentity == nil || again.Spec.LeaseDurationSeconds == nil || again.Spec.RenewTime == nil {
		t.Errorf("the Lease made again is not whole: %+v", again.Spec)
	}
	first := again.ResourceVersion
	eventually(t, 10*heartbeat, 100*time.Millisecond, "renewed after it was made again", func() error {
		l := &coordinationv1.Lease{}
		if err := hub.Get(ctx, key, l); err != nil {
			return err
		}
		if l.ResourceVersion == first {
			return fmt.Errorf("not renewed since it was made again")
		}
		return nil
	})
}
