package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/work"
)

// Short Lease timings so the tests take seconds.
func lockOptions(identity string) work.LockOptions {
	return work.LockOptions{
		Identity:      identity,
		LeaseDuration: 4 * time.Second,
		RenewDeadline: 3 * time.Second,
		RetryPeriod:   500 * time.Millisecond,
	}
}

func gatewayClientset(t *testing.T, cluster string) kubernetes.Interface {
	t.Helper()
	cfg, err := gateway.ClusterConfig(fleetOf(t).Hub.Config, cluster)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// A Lease held by another writer in cluster-1 makes the sync there give up with LockHeld naming
// the holder, while cluster-2 is written; once the holder lets go, cluster-1 is written too and the
// Lease is released after.
func TestSyncLockHeldByAnotherWriter(t *testing.T) {
	ctx := testContext(t)
	c1, c2 := gatewayClientset(t, "cluster-1"), gatewayClientset(t, "cluster-2")

	// The other writer: a Lease in cluster-1, renewed just now, valid for a minute.
	holdLease(t, "cluster-1", "other-hub/replica-0", time.Minute)
	t.Cleanup(func() { deleteLease(t, "cluster-1") })
	direct, err := kubernetes.NewForConfig(fleetOf(t).Cluster("cluster-1").Config)
	if err != nil {
		t.Fatal(err)
	}

	var ran1, ran2 atomic.Bool
	err = work.WithLock(ctx, c1, "cluster-1", lockOptions("hub-a/test"), func(context.Context) error { ran1.Store(true); return nil })
	var lockHeld *work.LockHeldError
	if !errors.As(err, &lockHeld) || lockHeld.Holder != "other-hub/replica-0" {
		t.Fatalf("cluster-1 with a held Lease: %v, want a LockHeldError naming other-hub/replica-0", err)
	}
	if ran1.Load() {
		t.Fatalf("work ran in cluster-1 without the Lease")
	}
	if err := work.WithLock(ctx, c2, "cluster-2", lockOptions("hub-a/test"), func(context.Context) error { ran2.Store(true); return nil }); err != nil || !ran2.Load() {
		t.Fatalf("cluster-2 (Lease free) was not written while cluster-1 was locked: ran=%v err=%v", ran2.Load(), err)
	}

	// The same at the level of a sync: the declaration is LockHeld in cluster-1, Synced in cluster-2.
	s := newSyncer(t)
	obj, source := renderFleetPolicy(t, "e2e-sync-lockheld", auditTemplate("lockheld"), nil)
	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}}
	if d := onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), decl), policyhubv1.ClusterPhaseLockHeld); !strings.Contains(d.Message, "other-hub/replica-0") {
		t.Errorf("LockHeld message %q does not name the holder", d.Message)
	}
	onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-2"), decl), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() {
		for _, c := range []string{"cluster-1", "cluster-2"} {
			s.Sync(context.Background(), gatewayCluster(t, c), []work.Declaration{{Source: source, Prune: true}})
		}
	})
	if _, err := liveObject(t, "cluster-1", obj); err == nil {
		t.Errorf("cluster-1 was written while another writer held its Lease")
	}

	// The other writer releases (an empty holder, as leaderelection writes on release).
	releaseLease(t, "cluster-1")
	if err := work.WithLock(ctx, c1, "cluster-1", lockOptions("hub-a/test"), func(context.Context) error { ran1.Store(true); return nil }); err != nil || !ran1.Load() {
		t.Fatalf("cluster-1 after the release: ran=%v err=%v", ran1.Load(), err)
	}
	onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), decl), policyhubv1.ClusterPhaseSynced)
	after, err := direct.CoordinationV1().Leases(work.LeaseNamespace).Get(ctx, work.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(after.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("the Lease is still held by %q after the sync finished", h)
	}
	if after.Spec.LeaseTransitions == nil || *after.Spec.LeaseTransitions < 1 {
		t.Errorf("leaseTransitions = %v, want ≥ 1 (the Lease changed hands)", after.Spec.LeaseTransitions)
	}
}

// Two writers with different identities never write the same cluster at once: each writes
// ConfigMaps under the Lease, and at no point are both inside; both get their turn.
func TestSyncLockExcludesConcurrentWriters(t *testing.T) {
	ctx := testContext(t)
	const ns = "lock-e2e"
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-2").Config), ns)
	var inside, maxInside, turns atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, identity := range []string{"hub-a/replica-0", "hub-b/replica-0"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := gatewayClientset(t, "cluster-2")
			opts := lockOptions(identity)
			opts.AcquireTimeout = 60 * time.Second // wait for the other writer rather than give up
			errs <- work.WithLock(ctx, cs, "cluster-2", opts, func(ctx context.Context) error {
				n := inside.Add(1)
				defer inside.Add(-1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				turns.Add(1)
				// Real writes while holding the Lease, long enough for the other writer to try.
				for i := range 15 {
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", identity[:5], i)}}
					if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	if maxInside.Load() != 1 || turns.Load() != 2 {
		t.Errorf("writers inside at once: max %d (want 1); turns %d (want 2)", maxInside.Load(), turns.Load())
	}
}

// A Lease left behind by a writer that died (held, never renewed) stops blocking the cluster once
// it has gone unrenewed for its duration, as this hub has seen it.
func TestSyncTakesOverALeaseLeftByADeadWriter(t *testing.T) {
	ctx := testContext(t)
	holdLease(t, "cluster-1", "crashed-hub/replica-0", 3*time.Second)
	s := newSyncer(t)
	obj, source := renderFleetPolicy(t, "e2e-dead-writer", auditTemplate("dead-writer"), nil)
	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}}
	t.Cleanup(func() {
		s.Sync(context.Background(), gatewayCluster(t, "cluster-1"), []work.Declaration{{Source: source, Prune: true}})
	})

	onlyResult(t, s.Sync(ctx, gatewayCluster(t, "cluster-1"), decl), policyhubv1.ClusterPhaseLockHeld)
	eventually(t, 30*time.Second, 500*time.Millisecond, "the dead writer's Lease taken over", func() error {
		if d := s.Sync(ctx, gatewayCluster(t, "cluster-1"), decl).Declarations[0]; d.Phase != policyhubv1.ClusterPhaseSynced {
			return fmt.Errorf("phase %s: %s", d.Phase, d.Message)
		}
		return nil
	})
	if _, err := liveObject(t, "cluster-1", obj); err != nil {
		t.Errorf("not written after the take-over: %v", err)
	}
}
