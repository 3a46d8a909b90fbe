package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A server-side dry-run Kyverno refuses (kubectl apply --dry-run=server) counts as a refused
// admission in the cluster's blocked, the rollout gate's input (gate.maxBlocked), as the API and
// kubectl policyhub rollout status say: Kyverno 1.19's Event for it is the Event of a real refusal
// (same action, reason, reporter and message; its related resource has a UID), so the agent
// cannot count it apart, and says so rather than claim a count it cannot make.
func TestAgentCountsServerSideDryRunsAsBlocked(t *testing.T) {
	startHub(t, time.Hour)
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "agent-dry-run", "agent-dry-run-team"
	c2 := directClient(t, testFleet.Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Enforce", "cluster-2"))
	waitFleetPolicy(t, name, "synced in cluster-2", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))

	// Dry-runs only: nothing is ever created.
	eventually(t, 60*time.Second, time.Second, "Kyverno refuses a server-side dry-run in cluster-2", func() error {
		err := c2.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), "Deployments need a team label") {
			return fmt.Errorf("refused without the policy's message: %v", err)
		}
		return nil
	})
	waitResults(t, name, "the dry-run counted in cluster-2's blocked", func(fp *fleetView) error {
		if s := clusterStatus(fp, "cluster-2"); s == nil || s.Blocked < 1 {
			return fmt.Errorf("cluster-2: %+v", s)
		}
		return nil
	})
	if err := c2.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Deployment exists (%v): the count would not be of dry-runs alone", err)
	}
	summary, err := hubSummaryOf(t, "cluster-2")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range summary.Spec.Policies {
		if p.Name == name {
			found = true
			if p.Blocked < 1 {
				t.Errorf("summary entry of %s: blocked %d; want the dry-run in blocked", name, p.Blocked)
			}
		}
	}
	if !found {
		t.Errorf("cluster-2's summary has no entry for %s", name)
	}
}
