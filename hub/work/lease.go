package work

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The Lease every writer of a managed cluster takes, in that cluster.
const (
	LeaseNamespace = policyhubv1.SyncLeaseNamespace
	LeaseName      = policyhubv1.SyncLeaseName
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
	// LeaseName names the Lease; empty means LeaseName, the one every writer of a cluster takes.
	// Writers that take another name are not kept apart from those: only for writers whose
	// objects never meet (hubs each scoped to declarations of their own, as the e2e tests that run
	// side by side on one fleet are), and the rendered exemptions still name LeaseName only.
	LeaseName string
	// HolderDead, when set, says whether a holder identity is a process known to have stopped
	// writing: a replica of this hub whose membership Lease ran out (shard.Sharder.Dead). A Lease
	// such a holder left is taken at once, not after a full LeaseDuration of this process's own
	// watching. It must not block, and must say false for any holder it does not know.
	HolderDead func(holder string) bool

	// namespaceExists skips ensuring the Lease's namespace (the Syncer knows it from before).
	namespaceExists bool
	// observer remembers foreign Lease records across calls, so a dead writer's Lease expires.
	observer *leaseObserver
}

// leaseObserver remembers, per cluster, the Lease record last seen held by another writer and
// since when. leaderelection judges a Lease expired when it has itself seen the record unchanged
// for the Lease's duration (not by the holder's clock); each WithLock makes a new elector, so
// without this memory a Lease left behind by a writer that died would never look expired.
//
// It also remembers, per cluster, the Lease's transition count when this process last released
// it: finding the same count at the next acquisition proves no other writer held it meanwhile.
type leaseObserver struct {
	mu       sync.Mutex
	seen     map[string]observation
	released map[string]int
}

type observation struct {
	resourceVersion string
	since           time.Time
}

func newLeaseObserver() *leaseObserver {
	return &leaseObserver{seen: map[string]observation{}, released: map[string]int{}}
}

// rememberRelease records the Lease record this process left when it released the Lease; a
// record still held (the release failed) is forgotten instead.
func (o *leaseObserver) rememberRelease(cluster string, last *resourcelock.LeaderElectionRecord) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if last == nil || last.HolderIdentity != "" {
		delete(o.released, cluster)
		return
	}
	o.released[cluster] = last.LeaderTransitions
}

// alone reports whether found, the record seen just before acquiring, is the one this process
// left at its last release: then no other writer has held the Lease since.
func (o *leaseObserver) alone(cluster, identity string, found *resourcelock.LeaderElectionRecord) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	transitions, ok := o.released[cluster]
	return ok && found != nil && found.LeaderTransitions == transitions &&
		(found.HolderIdentity == "" || found.HolderIdentity == identity)
}

// forget drops what it remembers of a cluster (it left the fleet).
func (o *leaseObserver) forget(cluster string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, cluster)
	delete(o.released, cluster)
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

// releaseVerdict is what releaseIfExpired does with a Lease another writer may hold.
type releaseVerdict int

const (
	// keepHolder leaves the Lease alone: free, ours, or a holder that may still renew it.
	keepHolder releaseVerdict = iota
	// releaseExpired: this process saw the record unchanged for longer than its duration.
	releaseExpired
	// releaseDead: the holder is a replica of this hub that membership judged dead.
	releaseDead
)

// judgeHolder decides whether to empty the holder of a Lease: when it is another writer that
// is known dead (dead(holder)), or whose record this process has seen unchanged for longer than
// the Lease's duration. Any other holder (live, or unknown to membership: another hub, the CLI)
// keeps the Lease until then.
func judgeHolder(holder, identity string, dead func(string) bool, unchanged, duration time.Duration) releaseVerdict {
	switch {
	case holder == "" || holder == identity:
		return keepHolder
	case dead != nil && dead(holder):
		return releaseDead
	case unchanged > duration:
		return releaseExpired
	}
	return keepHolder
}

// releaseIfExpired empties the holder of a Lease another writer has not renewed for longer than
// its duration, as this process has seen it, or that a dead replica of this hub holds, so the
// elector can take it at once. The empty holder is written conditionally on the Lease's
// resourceVersion: a holder that renews meanwhile wins, and nothing is released.
func releaseIfExpired(ctx context.Context, cs kubernetes.Interface, cluster, name, identity string, o *leaseObserver, defaultDuration time.Duration, dead func(string) bool) error {
	leases := cs.CoordinationV1().Leases(LeaseNamespace)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
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
	verdict := judgeHolder(holder, identity, dead, o.unchangedFor(cluster, lease.ResourceVersion, time.Now()), duration)
	if verdict == keepHolder {
		return nil
	}
	empty := ""
	lease.Spec.HolderIdentity = &empty
	// The resourceVersion makes this conditional: a holder that renews meanwhile wins.
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("cluster %s: release the sync Lease %q left unrenewed: %w", cluster, holder, err)
	}
	if verdict == releaseDead {
		ctrllog.FromContext(ctx).Info("released the sync Lease of a replica known dead", "holder", holder)
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
	// Lease is the Lease's name (empty: LeaseName).
	Lease string
}

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("cluster %s: the sync Lease %s/%s is held by %q; retrying later", e.Cluster, LeaseNamespace, cmp.Or(e.Lease, LeaseName), e.Holder)
}

// leaseName is the name of the Lease o configures.
func (o LockOptions) leaseName() string { return cmp.Or(o.LeaseName, LeaseName) }

// IsLockHeld reports whether err is (or wraps) a LockHeldError.
func IsLockHeld(err error) bool {
	var held *LockHeldError
	return errors.As(err, &held)
}

// Session is what a writer learns on taking the Lease.
type Session struct {
	// Alone is true when no other writer has held the Lease since this process released it last:
	// every write of a policyhub writer to the cluster since then was this process's own.
	Alone bool
}

// WithLock runs work while holding the cluster's sync Lease and releases the Lease when work
// returns. The Lease's namespace is created if missing. When another writer holds the Lease for
// longer than AcquireTimeout, work does not run and the error is a LockHeldError. work's context
// ends if the Lease is lost (it could not be renewed), so work stops writing.
func WithLock(ctx context.Context, cs kubernetes.Interface, cluster string, opts LockOptions, work func(ctx context.Context) error) error {
	held, err := acquire(ctx, cs, cluster, opts)
	if err != nil {
		return err
	}
	defer held.release()
	workCtx, cancel := held.within(ctx)
	defer cancel()
	return work(workCtx)
}

// recordingLock is the Lease lock of one acquisition. It remembers the record found before
// acquiring and the last record written (after the release: the released record).
type recordingLock struct {
	resourcelock.Interface
	mu      sync.Mutex
	looked  bool
	found   *resourcelock.LeaderElectionRecord
	written *resourcelock.LeaderElectionRecord
}

func (l *recordingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.looked && (err == nil || apierrors.IsNotFound(err)) {
		l.looked = true
		if err == nil {
			found := *rec
			l.found = &found
		}
	}
	return rec, raw, err
}

func (l *recordingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, rec)
	l.remember(rec, err)
	return err
}

func (l *recordingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, rec)
	l.remember(rec, err)
	return err
}

func (l *recordingLock) remember(rec resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.written = &rec
	}
}

func (l *recordingLock) records() (found, written *resourcelock.LeaderElectionRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.found, l.written
}

// heldLease is a cluster's sync Lease taken by this process: renewed in the background until
// released, or until it is lost (it could not be renewed in time).
type heldLease struct {
	// ctx ends when the Lease is lost or released: writes made under the Lease use it.
	ctx     context.Context
	session Session
	// stop ends the renewals; runDone is closed once the elector has stopped (and released).
	stop    context.CancelFunc
	runDone chan struct{}
	// afterRelease runs once, after the release (it remembers the released record).
	afterRelease func()
	once         sync.Once
}

// within returns a context for work under the Lease: it ends when ctx ends or the Lease is lost.
func (h *heldLease) within(ctx context.Context) (context.Context, context.CancelFunc) {
	workCtx, cancel := context.WithCancel(ctx)
	unlink := context.AfterFunc(h.ctx, cancel)
	return workCtx, func() { unlink(); cancel() }
}

// lost reports whether the Lease could not be renewed (or was released).
func (h *heldLease) lost() bool { return h.ctx.Err() != nil }

// release gives the Lease up (when still held) and returns once it is given up. It is safe to
// call more than once.
func (h *heldLease) release() {
	h.once.Do(func() {
		h.stop()
		<-h.runDone
		h.afterRelease()
	})
}

// acquire takes the cluster's sync Lease and keeps renewing it until released. The Lease's
// namespace is created if missing. When another writer holds the Lease for longer than
// AcquireTimeout, the error is a LockHeldError. Renewals outlive ctx, which only bounds the wait.
func acquire(ctx context.Context, cs kubernetes.Interface, cluster string, opts LockOptions) (*heldLease, error) {
	opts = opts.withDefaults()
	if opts.Identity == "" {
		return nil, fmt.Errorf("cluster %s: sync Lease needs an identity", cluster)
	}
	if !opts.namespaceExists {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("cluster %s: create namespace %s for the sync Lease: %w", cluster, LeaseNamespace, err)
		}
	}

	if opts.observer != nil {
		if err := releaseIfExpired(ctx, cs, cluster, opts.leaseName(), opts.Identity, opts.observer, opts.LeaseDuration, opts.HolderDead); err != nil {
			return nil, err
		}
	}

	// The elector runs until released, not until the caller's context ends.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	acquired := make(chan context.Context, 1)
	lock := &recordingLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: LeaseNamespace, Name: opts.leaseName()},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: opts.LeaseDuration,
		RenewDeadline: opts.RenewDeadline,
		RetryPeriod:   opts.RetryPeriod,
		// Released as soon as the holder is done, so the next writer need not wait for expiry.
		ReleaseOnCancel: true,
		Name:            cluster,
		Callbacks: leaderelection.LeaderCallbacks{
			// leaderCtx ends when the Lease is lost or released.
			OnStartedLeading: func(leaderCtx context.Context) { acquired <- leaderCtx },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("cluster %s: sync Lease: %w", cluster, err)
	}
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		elector.Run(runCtx)
	}()
	held := &heldLease{stop: stop, runDone: runDone, afterRelease: func() {
		// Called once the elector has stopped, so the release (if any) is the last record written.
		if opts.observer != nil {
			_, released := lock.records()
			opts.observer.rememberRelease(cluster, released)
		}
	}}
	taken := func(leaderCtx context.Context) *heldLease {
		found, _ := lock.records()
		held.ctx = leaderCtx
		held.session = Session{Alone: opts.observer != nil && opts.observer.alone(cluster, opts.Identity, found)}
		return held
	}

	timeout := time.NewTimer(opts.AcquireTimeout)
	defer timeout.Stop()
	select {
	case leaderCtx := <-acquired:
		return taken(leaderCtx), nil
	case <-timeout.C:
	case <-ctx.Done():
	}
	// Stop trying. The elector may have acquired the Lease just as the wait ended: then it is
	// held, and the caller gets it.
	select {
	case leaderCtx := <-acquired:
		return taken(leaderCtx), nil
	default:
	}
	stop()
	<-runDone
	// Had it been acquired meanwhile, the stop released it: remember what was left.
	held.afterRelease()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("cluster %s: waiting for the sync Lease: %w", cluster, ctx.Err())
	}
	return nil, &LockHeldError{Cluster: cluster, Holder: elector.GetLeader(), Lease: opts.LeaseName}
}
