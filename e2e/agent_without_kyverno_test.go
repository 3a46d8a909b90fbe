package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/internal/logtest"
)

// On a cluster that serves none of Kyverno's report APIs (Kyverno not installed yet: here only its
// ClusterPolicy CRD is there), a missing API is a fact, not an error: the agent's first summary
// reaches the hub without waiting for a full read of the cluster (SyncTimeout is ten minutes
// here), saying that no report API is served, and nothing is logged as a failure while the agent
// keeps discovering.
func TestAgentWithoutKyvernoReportsAtOnce(t *testing.T) {
	inParallel(t)
	// A fleet of its own, whose clusters serve no Kyverno API.
	own := fleet.StartForTest(t, fleet.Options{MinimalCRDs: true})
	const cluster = "cluster-1"
	hubCfg := agentHubConfigOn(t, own.Hub.Config, cluster)
	logs := &logtest.Lines{}
	ctx, cancel := context.WithCancel(logs.Context(context.Background()))
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Options{
			Cluster: cluster, Managed: own.Cluster(cluster).Config, Hub: hubCfg,
			PushInterval: 500 * time.Millisecond, Heartbeat: time.Second, DiscoveryInterval: time.Second,
			SyncTimeout: 10 * time.Minute,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})

	hub := directClient(t, own.Hub.Config)
	ctxTest := testContext(t)
	summary := &policyhubv1.PolicyReportSummary{}
	eventually(t, 60*time.Second, 100*time.Millisecond, "the agent's first summary on the hub", func() error {
		return hub.Get(ctxTest, client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}, summary)
	})
	if e := summary.Spec.Engine; len(e.ReportAPIs) != 0 || e.KyvernoWebhooks {
		t.Errorf("engine %+v: want no report API and no Kyverno webhooks", e)
	}

	// A window of five Lease renewals, a discovery a second meanwhile: no failure logged.
	lease := &coordinationv1.Lease{}
	renewals, last := 0, ""
	eventually(t, 30*time.Second, 100*time.Millisecond, "five Lease renewals", func() error {
		if err := hub.Get(ctxTest, client.ObjectKey{Namespace: cluster, Name: policyhubv1.AgentLeaseName}, lease); err != nil {
			return err
		}
		if lease.ResourceVersion != last {
			renewals, last = renewals+1, lease.ResourceVersion
		}
		if renewals < 6 { // the first read is the Lease as found
			return fmt.Errorf("%d renewals", renewals-1)
		}
		return nil
	})
	if n := logs.Count("failed"); n != 0 {
		t.Errorf("%d failure lines for a cluster that simply runs no Kyverno:\n%s", n, logs)
	}
	if logs.Count("renewed the agent's Lease") == 0 {
		t.Errorf("nothing the agent logged was recorded: the check of its log is blind:\n%s", logs)
	}
}
