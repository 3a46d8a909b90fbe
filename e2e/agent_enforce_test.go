package e2e

import (
	"fmt"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An Enforce policy refuses a Deployment in cluster 2. Kyverno writes no report for a refused
// admission, only an Event: the agent counts it, and the blocked admission shows in the cluster's
// summary and in the FleetPolicy's status.
func TestAgentCountsBlockedAdmissions(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "agent-enforce", "agent-enforce-team"
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Enforce", "cluster-2"))
	waitFleetPolicy(t, name, "synced in cluster-2", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))

	waitRefused(t, "cluster-2", ns, "Deployments need a team label")

	waitResults(t, name, "the blocked admission in cluster-2's status", func(fp *fleetView) error {
		if s := clusterStatus(fp, "cluster-2"); s == nil || s.Blocked < 1 {
			return fmt.Errorf("cluster-2: %+v", s)
		}
		return nil
	})
	summary, err := hubSummaryOf(t, "cluster-2")
	if err != nil {
		t.Fatal(err)
	}
	if summary.Spec.Blocked < 1 {
		t.Errorf("cluster-2's summary counts %d blocked admissions", summary.Spec.Blocked)
	}
	found := false
	for _, p := range summary.Spec.Policies {
		if p.Name == name {
			found = true
			if p.Blocked < 1 || p.Kind != "ClusterPolicy" {
				t.Errorf("summary entry of %s: %+v", name, p)
			}
		}
	}
	if !found {
		t.Errorf("cluster-2's summary has no entry for %s: %+v", name, summary.Spec.Policies)
	}
}
