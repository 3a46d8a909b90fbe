package sync

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The Lease every writer of a managed cluster takes, in that cluster.
const (
	LeaseNamespace = "policyhub-system"
	LeaseName      = "policyhub-sync"
)

// LockOptions tune the cluster sync Lease.
type LockOptions struct {
	// Identity of this writer, unique among all writers (e.g. hub id and pod name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are leaderelection's; zero means 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// AcquireTimeout is how long to try for a Lease another writer holds before giving up with a
	// LockHeldError; zero means 2 × RetryPeriod.
	AcquireTimeout time.Duration

	// namespaceExists skips ensuring the Lease's namespace (the Syncer knows it from before).
	namespaceExists bool
	// observer remembers foreign Lease records across calls, so a dead writer's Lease expires.
	observer *leaseObserver
}

// leaseObserver remembers, per cluster, the Lease record last seen held by another writer and
// since when. leaderelection judges a Lease expired when it has itself seen the record unchanged
// for the Lease's duration (not by the holder's clock); each WithLock makes a new elector, so
// without this memory a Lease left behind by a writer that died would never look expired.
type leaseObserver struct {
	mu   gosync.Mutex
	seen map[string]observation
}

type observation struct {
	resourceVersion string
	since           time.Time
}

func newLeaseObserver() *leaseObserver {
	return &leaseObserver{seen: map[string]observation{}}
}

// unchangedFor records the record's version and says how long it has been seen unchanged.
func (o *leaseObserver) unchangedFor(cluster, resourceVersion string, now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs, ok := o.seen[cluster]
	if !ok || obs.resourceVersion != resourceVersion {
		obs = observation{resourceVersion: resourceVersion, since: now}
		o.seen[cluster] = obs
	}
	return now.Sub(obs.since)
}

// releaseIfExpired empties the holder of a Lease another writer has not renewed for longer than
// its duration, as this process has seen it, so the elector can take it at once.
func releaseIfExpired(ctx context.Context, cs kubernetes.Interface, cluster, identity string, o *leaseObserver, defaultDuration time.Duration) error {
	leases := cs.CoordinationV1().Leases(LeaseNamespace)
	lease, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster %s: read the sync Lease: %w", cluster, err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" || holder == identity {
		return nil
	}
	duration := defaultDuration
	if lease.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	if o.unchangedFor(cluster, lease.ResourceVersion, time.Now()) <= duration {
		return nil
	}
	empty := ""
	lease.Spec.HolderIdentity = &empty
	// The resourceVersion makes this conditional: a holder that renews meanwhile wins.
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("cluster %s: release the sync Lease %q left unrenewed: %w", cluster, holder, err)
	}
	return nil
}

func (o LockOptions) withDefaults() LockOptions {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.AcquireTimeout == 0 {
		o.AcquireTimeout = 2 * o.RetryPeriod
	}
	return o
}

// LockHeldError says another writer holds the cluster's sync Lease.
type LockHeldError struct {
	Cluster, Holder string
}

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("cluster %s: the sync Lease %s/%s is held by %q; retrying later", e.Cluster, LeaseNamespace, LeaseName, e.Holder)
}

// IsLockHeld reports whether err is (or wraps) a LockHeldError.
func IsLockHeld(err error) bool {
	var held *LockHeldError
	return errors.As(err, &held)
}

// WithLock runs work while holding the cluster's sync Lease and releases the Lease when work
// returns. The Lease's namespace is created if missing. When another writer holds the Lease for
// longer than AcquireTimeout, work does not run and the error is a LockHeldError. work's context
// ends if the Lease is lost (it could not be renewed), so work stops writing.
func WithLock(ctx context.Context, cs kubernetes.Interface, cluster string, opts LockOptions, work func(ctx context.Context) error) error {
	opts = opts.withDefaults()
	if opts.Identity == "" {
		return fmt.Errorf("cluster %s: sync Lease needs an identity", cluster)
	}
	if !opts.namespaceExists {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %s: create namespace %s for the sync Lease: %w", cluster, LeaseNamespace, err)
		}
	}

	if opts.observer != nil {
		if err := releaseIfExpired(ctx, cs, cluster, opts.Identity, opts.observer, opts.LeaseDuration); err != nil {
			return err
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	acquired := make(chan struct{})
	workDone := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: LeaseNamespace, Name: LeaseName},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
		},
		LeaseDuration: opts.LeaseDuration,
		RenewDeadline: opts.RenewDeadline,
		RetryPeriod:   opts.RetryPeriod,
		// Released as soon as work is done, so the next writer need not wait for expiry.
		ReleaseOnCancel: true,
		Name:            cluster,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				close(acquired)
				workDone <- work(leaderCtx)
				// Ends the renew loop, which then releases the Lease.
				stop()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("cluster %s: sync Lease: %w", cluster, err)
	}
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		elector.Run(runCtx)
	}()

	timeout := time.NewTimer(opts.AcquireTimeout)
	defer timeout.Stop()
	select {
	case <-acquired:
		err := <-workDone
		<-runDone
		return err
	case <-timeout.C:
	case <-ctx.Done():
	}
	stop()
	<-runDone
	// The elector may have acquired the Lease just as the wait ended: then work ran or runs.
	select {
	case <-acquired:
		return <-workDone
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("cluster %s: waiting for the sync Lease: %w", cluster, ctx.Err())
	}
	return &LockHeldError{Cluster: cluster, Holder: elector.GetLeader()}
}
