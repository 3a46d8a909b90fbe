package e2e

import (
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A ClusterPolicy of the same name that policyhub does not own makes cluster-1 a Conflict in the
// FleetPolicy's status (Ready False, reason Conflict, a Warning Event), while cluster-2 is Synced.
func TestHubReportsConflictPerCluster(t *testing.T) {
	inParallel(t)
	startHub(t, 10*time.Minute)
	ctx := testContext(t)
	foreign, _ := renderFleetPolicy(t, "e2e-hub-conflict", auditTemplate("hub-conflict"), nil)
	foreign.SetLabels(nil)
	foreign.SetAnnotations(nil)
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	if err := cluster1.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster1.Delete(ctx, foreign) })

	createFleetPolicy(t, `
metadata: {name: e2e-hub-conflict}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("hub-conflict"))
	// The clusters' slices are written before the declaration's status: wait for both.
	phases := wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Conflict", "cluster-2": "Synced"})
	fp := waitFleetPolicy(t, "e2e-hub-conflict", "conflict in cluster-1 only, in the slices and the status", func(fp *fleetView) error {
		if err := phases(fp); err != nil {
			return err
		}
		if ready := findCondition(fp, policyhubv1.ConditionReady); ready == nil || ready.Status != "False" || ready.Reason != "Conflict" {
			return errorf("Ready condition %+v, want False/Conflict", ready)
		}
		if fp.Status.Summary.Clusters != 2 || fp.Status.Summary.Synced != 1 || fp.Status.Summary.Failed != 1 {
			return errorf("summary %+v, want 2 clusters, 1 synced, 1 failed", fp.Status.Summary)
		}
		return nil
	})
	if fp.Clusters[0].Actions.Conflict != 1 || !strings.Contains(fp.Clusters[0].Message, "not managed by policyhub") {
		t.Errorf("cluster-1 status %+v", fp.Clusters[0])
	}

	hub := directClient(t, fleetOf(t).Hub.Config)
	eventually(t, 30*time.Second, 200*time.Millisecond, "a Warning Event about the conflict", func() error {
		list := &eventsv1.EventList{}
		if err := hub.List(ctx, list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "e2e-hub-conflict" && e.Type == "Warning" && e.Reason == "Conflict" && strings.Contains(e.Note, "cluster-1") {
				return nil
			}
		}
		return errorf("no Conflict Event among %d events", len(list.Items))
	})
}
