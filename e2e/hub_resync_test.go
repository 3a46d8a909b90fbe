package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Resyncs with nothing changed persist nothing: the policies in both clusters, the clusters' sync
// Leases and the FleetPolicy itself keep their resourceVersions while the hub keeps resyncing.
func TestHubNoOpResyncsPersistNothing(t *testing.T) {
	hub := startHub(t, time.Second)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-hub-resync}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("hub-resync"))
	waitFleetPolicy(t, fp.Name, "synced in both", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))

	versions := func() map[string]string {
		v := map[string]string{}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(clusterPolicyGVK)
		obj.SetName(fp.Name)
		for _, c := range []string{"cluster-1", "cluster-2"} {
			live, err := liveObject(t, c, obj)
			if err != nil {
				t.Fatal(err)
			}
			v[c+" policy"] = live.GetResourceVersion()
			v[c+" lease"] = leaseVersion(t, c)
		}
		current := &policyhubv1.FleetPolicy{}
		if err := directClient(t, fleetOf(t).Hub.Config).Get(context.Background(), client.ObjectKeyFromObject(fp), current); err != nil {
			t.Fatal(err)
		}
		v["FleetPolicy"] = current.ResourceVersion
		return v
	}
	unchanged := func() float64 {
		return hub.syncOps(t, "cluster-1", "unchanged") + hub.syncOps(t, "cluster-2", "unchanged")
	}
	// Let a first resync settle (status after creation), then count from there.
	eventually(t, 30*time.Second, 200*time.Millisecond, "a first no-op resync", func() error {
		if unchanged() < 2 {
			return errorf("no resync yet")
		}
		return nil
	})
	before, start := versions(), unchanged()
	eventually(t, 60*time.Second, 200*time.Millisecond, "three more resyncs of both clusters", func() error {
		if unchanged()-start < 6 {
			return errorf("%v resyncs so far", unchanged()-start)
		}
		return nil
	})
	after := versions()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: resourceVersion %s → %s across no-op resyncs", k, v, after[k])
		}
	}
}
