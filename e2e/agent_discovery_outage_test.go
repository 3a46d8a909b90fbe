package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/policyhub/policyhub/agent/collect"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/internal/logtest"
)

// A cluster whose API cannot be read (its kube-apiserver down) keeps the agent's collector
// unsynced, so no empty summary claims a clean cluster; the failure is logged once while it lasts,
// not at every discovery, and its end once; then the cluster is read. Against a real
// kube-apiserver, stopped and started again.
func TestAgentDiscoveryFailureLoggedOnce(t *testing.T) {
	inParallel(t)
	// A fleet of its own, whose cluster it stops: no other test is disturbed.
	own := fleet.StartForTest(t, fleet.Options{MinimalCRDs: true})
	cluster := own.Cluster("cluster-1")
	if err := cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = cluster.StartAPIServer(context.Background())
		}
	})
	c, err := collect.New(cluster.Config, collect.Options{DiscoveryInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Lines{Verbosity: 1}
	ctx, cancel := context.WithCancel(logs.Context(context.Background()))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	eventually(t, 60*time.Second, 100*time.Millisecond, "five failed discoveries", func() error {
		if n := logs.Count("discovery of report and policy APIs failed again"); n < 4 {
			return fmt.Errorf("%d repeated failures logged at V(1)", n)
		}
		return nil
	})
	if n := logs.Count("discovery of report and policy APIs failed; will retry"); n != 1 {
		t.Errorf("the failure was logged %d times at V(0) over five attempts, want once:\n%s", n, logs)
	}
	if c.Synced() {
		t.Error("synced although the cluster could not be read")
	}

	if err := cluster.StartAPIServer(testContext(t)); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 60*time.Second, 100*time.Millisecond, "the cluster read after its apiserver came back", func() error {
		if !c.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	if n := logs.Count("discovery of report and policy APIs succeeded after failing"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once:\n%s", n, logs)
	}
}
