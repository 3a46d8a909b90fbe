package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An agent that cannot read Kyverno's metrics never takes a refusal out of blocked: a refused
// server-side dry-run counts as blocked, the summary says dry-runs were not counted and why,
// and the FleetPolicy's cluster status says its blocked may include dry-runs.
func TestAgentBlockedKeepsDryRunsItCannotCount(t *testing.T) {
	startHub(t, time.Hour)
	// Nothing listens on port 1 of the loopback: the metrics are unreachable.
	startAgentWith(t, "cluster-2", time.Minute, []string{"http://127.0.0.1:1/metrics"})
	ctx := testContext(t)
	const ns, name = "agent-dry-run-uncounted", "agent-dry-run-uncounted-team"
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Enforce", "cluster-2"))
	waitFleetPolicy(t, name, "synced in cluster-2", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))

	eventually(t, 60*time.Second, time.Second, "Kyverno refuses a server-side dry-run in cluster-2", func() error {
		return refusedDryRun(ctx, c2, ns)
	})
	waitResults(t, name, "the uncounted dry-run in cluster-2's blocked, said to be included", func(fp *fleetView) error {
		if s := clusterStatus(fp, "cluster-2"); s == nil || s.Blocked != 1 || !s.BlockedIncludesDryRuns {
			return fmt.Errorf("cluster-2: %+v", s)
		}
		return nil
	})
	s, err := hubSummaryOf(t, "cluster-2")
	if err != nil {
		t.Fatal(err)
	}
	k := s.Spec.Engine.Kyverno
	if k == nil || k.DryRunsCounted == nil || *k.DryRunsCounted || !strings.Contains(k.DryRunsNotCounted, "127.0.0.1:1") {
		t.Errorf("engine.kyverno %+v: want dry-runs not counted, naming the unreachable endpoint", k)
	}
	if p := summaryPolicy(s, name); p == nil || p.Blocked != 1 || p.BlockedDryRuns != 0 {
		t.Errorf("summary entry %+v: want blocked 1, no dry-runs taken out", p)
	}
}
