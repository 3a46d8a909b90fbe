package e2e

import (
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A FleetPolicy whose placementRef names an OCM Placement that does not exist is not Ready: the
// condition's reason is PlacementNotFound and its message names the field and the Placement, and a
// Warning Event says the same (before, it was Ready with "the placement selects no cluster").
func TestHubSaysThePlacementIsMissing(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-missing-placement}
spec:
  placement: {placementRef: {name: no-such-placement, namespace: default}}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("missing-placement"))
	const want = "spec.placement.placementRef: the OCM Placement default/no-such-placement does not exist"
	waitFleetPolicy(t, fp.Name, "Ready False, PlacementNotFound", func(fp *fleetView) error {
		ready := meta.FindStatusCondition(fp.Status.Conditions, policyhubv1.ConditionReady)
		if ready == nil || ready.Status != "False" || ready.Reason != "PlacementNotFound" || ready.Message != want {
			return errorf("Ready %+v, want False, PlacementNotFound, %q", ready, want)
		}
		return nil
	})
	hub := directClient(t, fleetOf(t).Hub.Config)
	eventually(t, 30*time.Second, 200*time.Millisecond, "a PlacementNotFound Warning Event", func() error {
		list := &eventsv1.EventList{}
		if err := hub.List(ctx, list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == fp.Name && e.Type == "Warning" && e.Reason == "PlacementNotFound" && strings.Contains(e.Note, want) {
				return nil
			}
		}
		return errorf("none among %d Events", len(list.Items))
	})
}
