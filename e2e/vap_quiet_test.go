package e2e

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The agent's background evaluation of ValidatingAdmissionPolicies, run again and again over an
// unchanged cluster (every second here; every minute by default), writes nothing on the hub:
// its results keep their content (times included), so the summary is neither written nor
// re-observed. Evaluations are counted on cluster-1's kube-apiserver (each lists the policies).
func TestValidatingAdmissionPolicyEvaluationOfAQuietClusterWritesNothing(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "vap-quiet", "vap-quiet"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatal(err)
	}
	createFleetPolicy(t, vapTeamPolicy(name, "Audit", "cluster-1", ns))
	waitFleetPolicy(t, name, "synced in cluster-1", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	end := launchAgentTweaked(t, "cluster-1", time.Minute, metricsURLs(managedCluster(t, "cluster-1").KyvernoMetricsURL),
		func(o *agent.Options) { o.AdmissionPolicyInterval = time.Second })
	t.Cleanup(func() {
		if err := end(); err != nil {
			t.Errorf("agent of cluster-1: %v", err)
		}
		deleteSummary(t, "cluster-1")
	})
	waitResults(t, name, "cluster-1's failure", func(fp *fleetView) error {
		if s := clusterStatus(fp, "cluster-1"); s == nil || s.Results == nil || s.Results.Fail != 1 {
			return fmt.Errorf("cluster-1: %+v", s)
		}
		return nil
	})

	// What this cluster and this declaration would be written as: the summary (its
	// resourceVersion), the FleetPolicy and its state in cluster-1 (its ClusterStatusSlice's
	// entry). Read by object, not by the hub API server's write counters: the shared fleet's
	// other clusters may be written meanwhile.
	hub := directClient(t, fleetOf(t).Hub.Config)
	key := client.ObjectKey{Namespace: "cluster-1", Name: policyhubv1.SummaryName}
	type written struct {
		summary, contentHash, declaration string
		state                             *policyhubv1.ClusterStatus
	}
	read := func() (written, error) {
		s := &policyhubv1.PolicyReportSummary{}
		if err := hub.Get(ctx, key, s); err != nil {
			return written{}, err
		}
		fp, err := fleetPolicyWithClusters(ctx, hub, name)
		if err != nil {
			return written{}, err
		}
		return written{s.ResourceVersion, s.Spec.ContentHash, fp.ResourceVersion, clusterStatus(fp, "cluster-1")}, nil
	}
	const evaluations = 10
	var before, after written
	// A window counts only if nothing else changed the summary's content in it (Kyverno's
	// reports of the fleet's other policies may still arrive): the quiet one is then looked
	// for again.
	eventually(t, 2*time.Minute, 100*time.Millisecond, fmt.Sprintf("a window of %d evaluations with an unchanged summary", evaluations), func() error {
		var err error
		if before, err = read(); err != nil {
			return err
		}
		lists := vapLists(t)
		eventually(t, 60*time.Second, 200*time.Millisecond, fmt.Sprintf("%d evaluations", evaluations), func() error {
			if n := vapLists(t) - lists; n < evaluations {
				return fmt.Errorf("%v evaluations", n)
			}
			return nil
		})
		if after, err = read(); err != nil {
			return err
		}
		if after.contentHash != before.contentHash {
			return fmt.Errorf("the summary's content changed in the window (%s to %s): try another", before.contentHash, after.contentHash)
		}
		return nil
	})
	if after.summary != before.summary {
		t.Errorf("cluster-1's summary was written over %d evaluations of an unchanged cluster (resourceVersion %s to %s): want no write", evaluations, before.summary, after.summary)
	}
	if after.declaration != before.declaration {
		t.Errorf("FleetPolicy %s was written over %d evaluations (resourceVersion %s to %s): want no write", name, evaluations, before.declaration, after.declaration)
	}
	if !reflect.DeepEqual(after.state, before.state) {
		t.Errorf("%s's state in cluster-1 changed over %d evaluations:\n%+v\nwas\n%+v", name, evaluations, after.state, before.state)
	}
}

// vapLists counts the LIST requests for ValidatingAdmissionPolicies cluster-1's kube-apiserver
// has served: one per evaluation of the agent (and a few of others').
func vapLists(t *testing.T) float64 {
	t.Helper()
	families, err := scrapeKubeAPIServer(testContext(t), fleetOf(t).Cluster("cluster-1").Config)
	if err != nil {
		t.Fatalf("cluster-1's kube-apiserver /metrics: %v", err)
	}
	var n float64
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["verb"] == "LIST" && labels["resource"] == "validatingadmissionpolicies" {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
