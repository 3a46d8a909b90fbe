package e2e

import (
	"fmt"
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

	hub := directClient(t, fleetOf(t).Hub.Config)
	key := client.ObjectKey{Namespace: "cluster-1", Name: policyhubv1.SummaryName}
	const evaluations = 10
	var got map[string]float64
	// A window counts only if nothing else changed the summary in it (Kyverno's reports of the
	// fleet's other policies may still arrive): the quiet one is then looked for again.
	eventually(t, 2*time.Minute, 100*time.Millisecond, fmt.Sprintf("a window of %d evaluations with an unchanged summary", evaluations), func() error {
		before := &policyhubv1.PolicyReportSummary{}
		if err := hub.Get(ctx, key, before); err != nil {
			return err
		}
		writes := hubWrites(t)
		lists := vapLists(t)
		eventually(t, 60*time.Second, 200*time.Millisecond, fmt.Sprintf("%d evaluations", evaluations), func() error {
			if n := vapLists(t) - lists; n < evaluations {
				return fmt.Errorf("%v evaluations", n)
			}
			return nil
		})
		after := &policyhubv1.PolicyReportSummary{}
		if err := hub.Get(ctx, key, after); err != nil {
			return err
		}
		got = writesBetween(writes, hubWrites(t))
		if after.Spec.ContentHash != before.Spec.ContentHash {
			return fmt.Errorf("the summary's content changed in the window (%s to %s): try another", before.Spec.ContentHash, after.Spec.ContentHash)
		}
		return nil
	})
	for _, resource := range []string{"policyreportsummaries", "policyreportsummaries/status", "fleetpolicies/status", "clusterstatusslices"} {
		if got[resource] != 0 {
			t.Errorf("%v writes of %s over %d evaluations of an unchanged cluster: want none", got[resource], resource, evaluations)
		}
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
