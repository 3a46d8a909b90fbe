package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A pass that waited on the sync Lease while its declaration was handed a newer wanted state
// writes nothing once it gets the Lease: what it carries is older than what the cluster may
// already hold from another replica (TestHubReplicasShareTheFleet saw such a pass put an Enforce
// back over an Audit, two extra writes per change). Without the newer state, the same pass writes.
func TestSyncSupersededWhileWaitingForTheLeaseWritesNothing(t *testing.T) {
	ctx := testContext(t)
	const cluster = "cluster-1"
	opts := lockOptions(e2eHubID + "/test")
	opts.AcquireTimeout = time.Minute // the pass waits for the other writer, as a hub's worker does
	s, err := work.NewSyncer(work.Options{HubID: e2eHubID, Lock: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	audit, source := renderFleetPolicy(t, "e2e-sync-superseded", auditTemplate("superseded"), nil)
	enforce, _ := renderFleetPolicy(t, "e2e-sync-superseded", auditTemplate("superseded"), ptr.To(policyhubv1.ModeEnforce))
	onlyResult(t, s.Sync(ctx, gatewayCluster(t, cluster), []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{audit}, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() {
		s.Sync(context.Background(), gatewayCluster(t, cluster), []work.Declaration{{Source: source, Prune: true}})
		deleteLease(t, cluster)
	})
	generation := func() int64 {
		t.Helper()
		live, err := liveObject(t, cluster, audit)
		if err != nil {
			t.Fatal(err)
		}
		return live.GetGeneration()
	}

	// stalePass asks for Enforce while another writer holds the Lease; superseded says whether a
	// newer state was handed over meanwhile (set before the other writer lets go).
	stalePass := func(superseded bool) *work.DeclarationResult {
		t.Helper()
		holdLease(t, cluster, "other-hub/replica-0", time.Minute)
		var newer atomic.Bool
		done := make(chan *work.ClusterResult, 1)
		go func() {
			done <- s.SyncWith(ctx, gatewayCluster(t, cluster), []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{enforce}, Prune: true}},
				work.PassOptions{Superseded: func(string) bool { return newer.Load() }})
		}()
		newer.Store(superseded)
		releaseLease(t, cluster)
		select {
		case res := <-done:
			if len(res.Declarations) != 1 {
				t.Fatalf("%d declaration results, want 1", len(res.Declarations))
			}
			return res.Declarations[0]
		case <-time.After(time.Minute):
			t.Fatal("the pass did not end a minute after the Lease was released")
			return nil
		}
	}

	before := generation()
	if d := stalePass(true); d.Phase != policyhubv1.ClusterPhasePending || d.Actions.Updated != 0 {
		t.Errorf("superseded pass: phase %s, actions %+v, want Pending with nothing written", d.Phase, d.Actions)
	}
	if got := generation(); got != before {
		t.Errorf("a superseded pass wrote its older content: generation %d, was %d", got, before)
	}
	// The check above could fail: the same pass, not superseded, writes its content.
	if d := stalePass(false); d.Phase != policyhubv1.ClusterPhaseSynced || d.Actions.Updated != 1 {
		t.Errorf("current pass: phase %s, actions %+v, want Synced with one update", d.Phase, d.Actions)
	}
	live, err := liveObject(t, cluster, audit)
	if err != nil {
		t.Fatal(err)
	}
	if live.GetGeneration() != before+1 || ruleFailureAction(live) != "Enforce" {
		t.Errorf("the current pass left generation %d (was %d) and failureAction %q, want one write of Enforce", live.GetGeneration(), before, ruleFailureAction(live))
	}
}
