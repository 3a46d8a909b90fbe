package e2e

import (
	"fmt"
	"k8s.io/client-go/rest"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// Back-to-back syncs of a cluster share one Lease session: the Lease is taken by the first,
// kept (renewed) between them, and given up by ReleaseLease; a Batcher gives it up by itself once
// the cluster has no more work.
func TestSyncKeepsLeaseAcrossPasses(t *testing.T) {
	ctx := testContext(t)
	const cluster = "cluster-1"
	syncer := newSyncer(t)
	target := gatewayCluster(t, cluster)
	direct, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	lease := func() *coordinationv1.Lease {
		t.Helper()
		l, err := direct.CoordinationV1().Leases(work.LeaseNamespace).Get(ctx, work.LeaseName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	identity := e2eHubID + "/test"

	first, firstSource := renderFleetPolicy(t, "lease-session-first", auditTemplate("lease-session"), nil)
	second, secondSource := renderFleetPolicy(t, "lease-session-second", auditTemplate("lease-session"), nil)
	decl := func(source string, obj *unstructured.Unstructured) work.Declaration {
		return work.Declaration{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}
	}
	t.Cleanup(func() {
		s := newSyncer(t)
		s.Sync(ctx, target, []work.Declaration{{Source: firstSource, Prune: true}, {Source: secondSource, Prune: true}})
		deleteLease(t, cluster)
	})

	onlyResult(t, syncer.SyncKeepingLease(ctx, target, []work.Declaration{decl(firstSource, first)}), policyhubv1.ClusterPhaseSynced)
	taken := lease()
	if h := ptr.Deref(taken.Spec.HolderIdentity, ""); h != identity {
		t.Fatalf("after the first sync the Lease is held by %q, want it kept by %q", h, identity)
	}

	onlyResult(t, syncer.SyncKeepingLease(ctx, target, []work.Declaration{decl(secondSource, second)}), policyhubv1.ClusterPhaseSynced)
	kept := lease()
	if h := ptr.Deref(kept.Spec.HolderIdentity, ""); h != identity {
		t.Fatalf("after the second sync the Lease is held by %q, want %q", h, identity)
	}
	if !kept.Spec.AcquireTime.Equal(taken.Spec.AcquireTime) || ptr.Deref(kept.Spec.LeaseTransitions, 0) != ptr.Deref(taken.Spec.LeaseTransitions, 0) {
		t.Errorf("the second sync took the Lease again (acquired %v, transitions %d; first acquired %v, transitions %d), want the first sync's session kept",
			kept.Spec.AcquireTime, ptr.Deref(kept.Spec.LeaseTransitions, 0), taken.Spec.AcquireTime, ptr.Deref(taken.Spec.LeaseTransitions, 0))
	}
	for _, obj := range []*unstructured.Unstructured{first, second} {
		if _, err := liveObject(t, cluster, obj); err != nil {
			t.Errorf("%s was not written under the kept Lease: %v", obj.GetName(), err)
		}
	}

	syncer.ReleaseLease(cluster)
	if h := ptr.Deref(lease().Spec.HolderIdentity, ""); h != "" {
		t.Fatalf("after ReleaseLease the Lease is held by %q, want it given up", h)
	}

	// A cluster's worker keeps the Lease only while work keeps coming: once idle, it gives it up.
	workers, err := work.NewWorkers(work.WorkersOptions{Sync: work.Options{HubID: e2eHubID, Lock: lockOptions(identity)}, Window: 10 * time.Millisecond,
		ClusterConfig: func(string) (*rest.Config, error) { return target.Config, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(workers.Close)
	changed, _ := renderFleetPolicy(t, "lease-session-first", auditTemplate("lease-session-changed"), nil)
	if err := workers.Want(cluster, decl(firstSource, changed), "changed"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 50*time.Millisecond, "the worker syncs the change", func() error {
		r, ok := workers.Result(cluster, firstSource)
		// Wrote is only the pass's word: Kyverno's readiness, confirmed a moment later, clears it.
		// The counts stay, so they say whether the pass wrote.
		if !ok || r.Token != "changed" || r.Phase != policyhubv1.ClusterPhaseSynced || r.Actions.Updated != 1 {
			return fmt.Errorf("result %+v (found %v); want Synced, one update, for token changed", r, ok)
		}
		return nil
	})
	eventually(t, 10*time.Second, 50*time.Millisecond, "the worker gives the Lease up once idle", func() error {
		if h := ptr.Deref(lease().Spec.HolderIdentity, ""); h != "" {
			return fmt.Errorf("the Lease is still held by %q", h)
		}
		return nil
	})
}
