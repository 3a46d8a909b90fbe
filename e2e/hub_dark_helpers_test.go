package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// darkClusterCase is one kind of dark cluster: an endpoint that does not answer as an outage
// does not, and the reason the hub must give for it.
type darkClusterCase struct {
	endpoint func(t *testing.T) string
	reason   string
}

// testDarkCluster puts a dark cluster ("dark-…", with cluster-2's credentials) next to cluster-1
// in the placement of several FleetPolicies: cluster-1 converges as if it were alone, the dark
// cluster is shown Failed with the reason within 60 s and metered unreachable; once its Secret
// points at cluster-2's apiserver it recovers by itself and receives the policies.
func testDarkCluster(t *testing.T, name string, c darkClusterCase) {
	h := startHub(t, time.Hour) // no resync: nothing but the workers' own retries brings it back
	ctx := testContext(t)
	if err := fleetOf(t).AddClusterSecret(ctx, name, c.endpoint(t), "cluster-2", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleetOf(t).RemoveClusterSecret(context.Background(), name) })

	start := time.Now()
	var names []string
	for i := range 5 {
		fp := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-%s-%d}
spec:
  placement: {clusters: [cluster-1, %s]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec(fmt.Sprintf("%s-%d", name, i)), name, i, name))
		names = append(names, fp.Name)
	}
	healthy := func(fp *fleetView) error {
		if got := clusterPhases(fp)["cluster-1"]; got != policyhubv1.ClusterPhaseSynced {
			return fmt.Errorf("cluster-1 is %q", got)
		}
		return nil
	}
	// The dark cluster costs the healthy one nothing: it converges within seconds, as alone.
	for _, n := range names {
		waitFleetPolicyWithin(t, 20*time.Second, n, "cluster-1 synced while "+name+" is dark", healthy)
	}
	t.Logf("cluster-1 synced for every FleetPolicy %.1fs after the first was created", time.Since(start).Seconds())
	for _, n := range names {
		waitFleetPolicyWithin(t, 60*time.Second-time.Since(start), n, name+" shown Failed with its reason", func(fp *fleetView) error {
			if err := healthy(fp); err != nil {
				return err
			}
			for _, cs := range fp.Clusters {
				if cs.Name == name {
					if cs.Phase != policyhubv1.ClusterPhaseFailed || !strings.Contains(cs.Message, name+": unreachable: "+c.reason) {
						return fmt.Errorf("%s is %s: %q, want Failed: %q", name, cs.Phase, cs.Message, name+": unreachable: "+c.reason)
					}
					return nil
				}
			}
			return fmt.Errorf("%s is not in the status", name)
		})
	}
	t.Logf("%s shown Failed in every FleetPolicy %.1fs after the first was created", name, time.Since(start).Seconds())
	if v, ok := h.scrape(t, "policyhub_cluster_reachable", map[string]string{"cluster": name}); !ok || v != 0 {
		t.Errorf("policyhub_cluster_reachable{cluster=%q} = %v (found %v), want 0", name, v, ok)
	}

	// It answers again: the worker's retries find it without anyone doing anything.
	if err := fleetOf(t).SetClusterEndpoint(ctx, name, fleetOf(t).Cluster("cluster-2").URL); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		waitFleetPolicyWithin(t, 60*time.Second, n, name+" recovered", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", name: "Synced"}))
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(clusterPolicyGVK)
		obj.SetName(n)
		if _, err := liveObject(t, "cluster-2", obj); err != nil {
			t.Errorf("%s was not written through %s once it answered: %v", n, name, err)
		}
	}
	if v, ok := h.scrape(t, "policyhub_cluster_reachable", map[string]string{"cluster": name}); !ok || v != 1 {
		t.Errorf("policyhub_cluster_reachable{cluster=%q} = %v (found %v) after recovery, want 1", name, v, ok)
	}
}

// waitFleetPolicyWithin is waitFleetPolicy with its own deadline.
func waitFleetPolicyWithin(t *testing.T, within time.Duration, name, what string, check func(*fleetView) error) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	eventually(t, max(within, time.Second), 100*time.Millisecond, what, func() error {
		fp, err := fleetPolicyWithClusters(testContext(t), hub, name)
		if err != nil {
			return err
		}
		return check(fp)
	})
}
