package e2e

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Deleting a FleetPolicy prunes its policy from every cluster before the FleetPolicy goes away.
func TestHubDeletePrunesEveryCluster(t *testing.T) {
	inParallel(t)
	startHub(t, 10*time.Minute)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-hub-delete}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("hub-delete"))
	waitFleetPolicy(t, fp.Name, "synced in both", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	waitPresence(t, fp.Name, map[string]bool{"cluster-1": true, "cluster-2": true})

	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.Delete(context.Background(), fp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "the FleetPolicy gone after pruning", func() error {
		err := hub.Get(context.Background(), client.ObjectKeyFromObject(fp), &policyhubv1.FleetPolicy{})
		if !apierrors.IsNotFound(err) {
			return errorf("still there: %v", err)
		}
		return nil
	})
	if got := presence(t, fp.Name); got["cluster-1"] || got["cluster-2"] {
		t.Errorf("the policy is still in the clusters after the FleetPolicy was deleted: %v", got)
	}
}
