package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Server-side dry-runs Kyverno refuses (kubectl apply --dry-run=server) do not count as refused
// admissions: the agent reads them from Kyverno's admission controller metrics
// (kyverno_policy_results_total{dry_run="true"}) and takes them out of the policy's blocked, the
// input of the cluster's blocked in the FleetPolicy status and of a rollout gate's maxBlocked,
// reporting them apart (blockedDryRuns). A real refused create then moves blocked to 1.
func TestAgentBlockedLeavesOutServerSideDryRuns(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "agent-dry-run", "agent-dry-run-team"
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Enforce", "cluster-2"))
	waitFleetPolicy(t, name, "synced in cluster-2", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))
	// The agent has read Kyverno's counters once (its baseline) before any dry-run.
	waitHubSummary(t, "cluster-2", "the agent counts dry-runs apart", func(s *policyhubv1.PolicyReportSummary) error {
		if k := s.Spec.Engine.Kyverno; k == nil || k.DryRunsCounted == nil || !*k.DryRunsCounted {
			return fmt.Errorf("engine.kyverno %+v", k)
		}
		return nil
	})

	// Two refused dry-runs; nothing is created.
	dryRun := func() error { return refusedDryRun(ctx, c2, ns) }
	eventually(t, 60*time.Second, time.Second, "Kyverno refuses a server-side dry-run in cluster-2", dryRun)
	if err := dryRun(); err != nil {
		t.Fatalf("the second dry-run: %v", err)
	}
	if err := c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Deployment exists (%v): the count would not be of dry-runs alone", err)
	}
	waitHubSummary(t, "cluster-2", "the two dry-runs counted apart", func(s *policyhubv1.PolicyReportSummary) error {
		p := summaryPolicy(s, name)
		if p == nil || p.BlockedDryRuns != 2 || p.Blocked != 0 || s.Spec.BlockedDryRuns < 2 {
			return fmt.Errorf("entry %+v, cluster blocked %d, dry-runs %d", p, s.Spec.Blocked, s.Spec.BlockedDryRuns)
		}
		return nil
	})
	// The hub reads that summary within moments: cluster-2's blocked must stay 0 meanwhile.
	holds(t, 5*time.Second, "cluster-2's blocked leaves the dry-runs out", func() error {
		if s := clusterStatus(readFleetPolicy(t, name), "cluster-2"); s == nil || s.Blocked != 0 || s.BlockedIncludesDryRuns {
			return fmt.Errorf("cluster-2: %+v", s)
		}
		return nil
	})

	// A real refusal counts.
	err := c2.Create(ctx, shopDeployment(ns, "web", ""))
	if err == nil || !strings.Contains(err.Error(), "Deployments need a team label") {
		t.Fatalf("create without a team label: %v, want Kyverno's refusal", err)
	}
	waitResults(t, name, "the refused create counted in cluster-2's blocked", func(fp *fleetView) error {
		if s := clusterStatus(fp, "cluster-2"); s == nil || s.Blocked != 1 || s.BlockedIncludesDryRuns {
			return fmt.Errorf("cluster-2: %+v", s)
		}
		return nil
	})
	s, err := hubSummaryOf(t, "cluster-2")
	if err != nil {
		t.Fatal(err)
	}
	if p := summaryPolicy(s, name); p == nil || p.Blocked != 1 || p.BlockedDryRuns != 2 {
		t.Errorf("summary entry %+v: want blocked 1 and the 2 dry-runs apart", p)
	}
}

// refusedDryRun makes a server-side dry-run create of a Deployment without a team label in ns,
// and says whether teamLabelPolicy refused it.
func refusedDryRun(ctx context.Context, c client.Client, ns string) error {
	err := c.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
	if err == nil {
		return fmt.Errorf("admitted")
	}
	if !strings.Contains(err.Error(), "Deployments need a team label") {
		return fmt.Errorf("refused without the policy's message: %v", err)
	}
	return nil
}

// summaryPolicy is the summary's entry of the policy name, or nil.
func summaryPolicy(s *policyhubv1.PolicyReportSummary, name string) *policyhubv1.PolicySummary {
	for i := range s.Spec.Policies {
		if s.Spec.Policies[i].Name == name {
			return &s.Spec.Policies[i]
		}
	}
	return nil
}

// waitHubSummary polls the cluster's summary on the hub until check accepts it.
func waitHubSummary(t *testing.T, cluster, what string, check func(*policyhubv1.PolicyReportSummary) error) {
	t.Helper()
	eventually(t, time.Minute, 300*time.Millisecond, what, func() error {
		s, err := hubSummaryOf(t, cluster)
		if err != nil {
			return err
		}
		return check(s)
	})
}
