package e2e

import (
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An agent that stops renewing its Lease is shown stale after three missed renewals, by the
// hub's clock, its last results kept; started again, it is fresh within seconds, before it has
// read the whole cluster.
func TestStoppedAgentTurnsStaleAndFreshAgain(t *testing.T) {
	inParallel(t)
	// A cluster of its own on cluster-2's apiserver: its agent stops and starts beside the
	// other tests' shared agents.
	const cluster = "agent-lease-stale"
	aliasCluster(t, cluster, "cluster-2")
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name, heartbeat = "agent-lease-stale", "agent-lease-stale-team", time.Second
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", cluster))
	waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{cluster: "Synced"}))
	if err := c2.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatal(err)
	}
	stop := runAgent(t, cluster, heartbeat)
	t.Cleanup(func() { deleteSummary(t, cluster) })
	fresh := func(fp *fleetView) error {
		if s := clusterStatus(fp, cluster); s == nil || s.Results == nil || s.Results.Fail < 1 || s.Stale {
			return fmt.Errorf("%s: %+v", cluster, s)
		}
		return nil
	}
	waitResults(t, name, "the cluster's failure, fresh", fresh)

	stop()
	stopped := time.Now()
	hub := directClient(t, fleetOf(t).Hub.Config)
	summaryKey := client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}
	before := &policyhubv1.PolicyReportSummary{}
	if err := hub.Get(ctx, summaryKey, before); err != nil {
		t.Fatal(err)
	}
	fp := waitResults(t, name, "the cluster stale", func(fp *fleetView) error {
		if s := clusterStatus(fp, cluster); s == nil || !s.Stale {
			return fmt.Errorf("%s: %+v", cluster, s)
		}
		return nil
	})
	if waited := time.Since(stopped); waited < 2*heartbeat {
		t.Errorf("stale %s after the agent stopped: before three renewals were missed", waited)
	}
	if s := clusterStatus(fp, cluster); s.Results == nil || s.Results.Fail < 1 {
		t.Errorf("stale results must keep the last known counts: %+v", s)
	}
	after := &policyhubv1.PolicyReportSummary{}
	if err := hub.Get(ctx, summaryKey, after); err != nil {
		t.Fatal(err)
	}
	ready := apimeta.FindStatusCondition(after.Status.Conditions, policyhubv1.ConditionReady)
	if ready == nil || ready.Reason != policyhubv1.ReasonStale {
		t.Errorf("the summary's Ready condition %+v, want reason %s", ready, policyhubv1.ReasonStale)
	}
	if after.Generation != before.Generation {
		t.Errorf("the summary changed (generation %d to %d) though only its agent's Lease went silent", before.Generation, after.Generation)
	}

	runAgent(t, cluster, heartbeat)
	restarted := time.Now()
	waitResults(t, name, "the cluster fresh again", fresh)
	if took := time.Since(restarted); took > 15*time.Second {
		t.Errorf("fresh %s after the agent restarted, want within seconds", took)
	}
}
