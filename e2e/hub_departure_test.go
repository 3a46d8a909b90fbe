package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
)

// A cluster that leaves the fleet (its cluster-gateway credential Secret is deleted) and that no
// declaration lists any more is let go of: its worker stops, the hub stops watching it, its series
// leave the hub's /metrics.
func TestHubLetsGoOfDepartedCluster(t *testing.T) {
	ctx := testContext(t)
	const departing, name = "departing", "departure-e2e"
	admin := directClient(t, testFleet.Hub.Config)

	// "departing" is cluster-2 under another name: its credential Secret holds cluster-2's, so
	// the hub's watch of it shows in cluster-2's apiserver.
	cluster2 := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: testFleet.SecretNamespace, Name: "cluster-2"}, cluster2); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: departing, Namespace: testFleet.SecretNamespace,
			Labels: map[string]string{gateway.CredentialTypeLabel: cluster2.Labels[gateway.CredentialTypeLabel]}},
		Type: cluster2.Type, Data: cluster2.Data,
	}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), secret) })

	// Kyverno watches ClusterPolicies in cluster-2 too: count the watches before the hub's.
	var others float64
	eventually(t, 30*time.Second, 200*time.Millisecond, "a steady count of ClusterPolicy watches in cluster-2", func() error {
		first, second := clusterPolicyWatches(t, "cluster-2"), clusterPolicyWatches(t, "cluster-2")
		if first != second {
			return fmt.Errorf("%v, then %v", first, second)
		}
		others = first
		return nil
	})

	hub := startHub(t, time.Hour)
	fp := createFleetPolicy(t, `
metadata: {name: `+name+`}
spec:
  placement: {clusters: [`+departing+`]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("departure"))
	waitFleetPolicy(t, name, "synced in "+departing, wantPhases(map[string]policyhubv1.ClusterPhase{departing: policyhubv1.ClusterPhaseSynced}))
	reachable := map[string]string{"cluster": departing} // the series of the cluster
	if v, ok := hub.scrape(t, "policyhub_cluster_reachable", reachable); !ok || v != 1 {
		t.Fatalf("policyhub_cluster_reachable for %s: %v (present: %v), want 1", departing, v, ok)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the hub watches ClusterPolicies in "+departing, func() error {
		if n := clusterPolicyWatches(t, "cluster-2"); n != others+1 {
			return fmt.Errorf("%v ClusterPolicy watches in cluster-2, want %v", n, others+1)
		}
		return nil
	})

	// The declaration goes first (pruned from the cluster), then the cluster.
	if err := admin.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "FleetPolicy "+name+" pruned and gone", func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(fp), &policyhubv1.FleetPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if err := admin.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the hub lets go of "+departing, func() error {
		for _, metric := range []string{"policyhub_cluster_reachable", "policyhub_sync_operations_total", "policyhub_sync_duration_seconds_count"} {
			if _, ok := hub.scrape(t, metric, reachable); ok {
				return fmt.Errorf("%s still has a series for %s", metric, departing)
			}
		}
		if n := clusterPolicyWatches(t, "cluster-2"); n != others {
			return fmt.Errorf("%v ClusterPolicy watches in cluster-2, want %v (the hub's ended)", n, others)
		}
		if slices.Contains(hub.workers.Clusters(), departing) {
			return fmt.Errorf("%s still has a worker", departing)
		}
		return nil
	})
}

// clusterPolicyWatches is how many watches of ClusterPolicies a managed cluster's apiserver is
// serving (its apiserver_longrunning_requests).
func clusterPolicyWatches(t *testing.T, cluster string) float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testFleet.Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(testContext(t))
	if err != nil {
		t.Fatalf("scrape %s's /metrics: %v", cluster, err)
	}
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") ||
			!strings.Contains(line, `resource="clusterpolicies"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		total += v
	}
	return total
}
