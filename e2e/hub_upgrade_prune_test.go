package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A FleetPolicy an older hub synced (its status counts its clusters; no ClusterStatusSlice names
// them, as before the slices) and that is deleted before the new hub has written its slices is
// still pruned from the clusters that hold it: the new hub asks every cluster of the fleet.
func TestHubPrunesADeclarationWithoutSlices(t *testing.T) {
	const name = "e2e-no-slices"
	fp := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("no-slices"), name))
	t.Run("synced by a hub that stops", func(t *testing.T) {
		startHub(t, time.Hour)
		waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	})
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.DeleteAllOf(ctx, &policyhubv1.ClusterStatusSlice{}, client.InNamespace(e2eHubNamespace),
		client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(fp.UID)}); err != nil {
		t.Fatal(err)
	}
	if got := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "ClusterPolicy", ""); !slices.Contains(got, name) {
		t.Fatalf("cluster-1 holds %v, want %s", got, name)
	}
	if err := hub.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}

	startHub(t, time.Hour)
	eventually(t, 60*time.Second, 200*time.Millisecond, "pruned from cluster-1 and gone", func() error {
		if got := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "ClusterPolicy", ""); slices.Contains(got, name) {
			return fmt.Errorf("cluster-1 still holds %s", name)
		}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(fp), &policyhubv1.FleetPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the FleetPolicy is still there (%v)", err)
		}
		return nil
	})
}
