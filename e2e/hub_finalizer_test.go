package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
)

// The shipped admission policy (config/admission) gives a declaration its finalizer when it is
// created, so the hub never has to write it; should the finalizer go missing anyway (removed by
// hand, or a hub without the policy), the hub controller adds it back.
func TestHubFinalizerSetAtAdmissionAndRestored(t *testing.T) {
	inParallel(t)
	startHub(t, 10*time.Minute)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)

	fp := createFleetPolicy(t, `
metadata: {name: e2e-finalizer}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("finalizer"))
	if !slices.Contains(fp.Finalizers, controllers.Finalizer) {
		t.Fatalf("created without the finalizer: %v", fp.Finalizers)
	}
	synced := waitFleetPolicy(t, fp.Name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	if synced.Generation != 1 || !slices.Contains(synced.Finalizers, controllers.Finalizer) {
		t.Fatalf("generation %d, finalizers %v", synced.Generation, synced.Finalizers)
	}

	// Removed by hand, with a requested reconcile: the controller puts it back.
	patch := client.MergeFrom(synced.DeepCopy())
	synced.Finalizers = nil
	synced.Annotations = map[string]string{"e2e/reconcile": "1"}
	if err := hub.Patch(ctx, synced.FleetPolicy, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "the finalizer restored", func() error {
		live := &policyhubv1.FleetPolicy{}
		if err := hub.Get(context.Background(), client.ObjectKeyFromObject(fp), live); err != nil {
			return err
		}
		if !slices.Contains(live.Finalizers, controllers.Finalizer) {
			return errorf("finalizers %v", live.Finalizers)
		}
		return nil
	})
}
