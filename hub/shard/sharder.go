package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Sharder keeps this replica's share of the fleet: it holds the replica's Lease, watches the
// others', and assigns the inventory over the live replicas whenever either changes. Until it has
// seen its own Lease live it owns nothing; once it lost its Lease it owns nothing again and stops.
type Sharder struct {
	replica    Replica
	client     kubernetes.Interface
	inventory  func(context.Context) ([]Cluster, error)
	loadFactor float64
	members    *Members

	current atomic.Pointer[Assignment]
	lost    atomic.Bool
	kick    chan struct{}
	// assignedLive are the live replicas the last assignment was made over (Start's loop only).
	assignedLive []string

	mu        sync.Mutex
	listeners []func(Assignment)
}

// NewSharder returns the sharder of replica r; inventory lists the fleet's clusters (with their
// pins), from a cache: it is read again at every change.
func NewSharder(r Replica, client kubernetes.Interface, inventory func(context.Context) ([]Cluster, error), loadFactor float64) *Sharder {
	s := &Sharder{replica: r, client: client, inventory: inventory, loadFactor: loadFactor,
		members: NewMembers(r.HubID, nil), kick: make(chan struct{}, 1)}
	s.current.Store(&Assignment{})
	s.members.OnChange(s.Kick)
	return s
}

// Kick asks for the assignment to be made again (the inventory changed). It never blocks.
func (s *Sharder) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// OnChange adds f, called with every new assignment that moves a cluster or changes the live
// replicas. Add them before Start.
func (s *Sharder) OnChange(f func(Assignment)) {
	s.mu.Lock()
	s.listeners = append(s.listeners, f)
	s.mu.Unlock()
}

// Assignment is the latest assignment (empty before the first, and after the Lease was lost).
func (s *Sharder) Assignment() Assignment { return *s.current.Load() }

// Works says whether this replica works cluster now (Assignment.Works).
func (s *Sharder) Works(cluster string) bool {
	return !s.lost.Load() && s.current.Load().Works(s.replica.Name, cluster)
}

// Dead says whether identity is a process of this hub whose replica Lease membership judged
// dead (Members.Dead): the holder of a cluster's sync Lease it names will never renew it.
func (s *Sharder) Dead(identity string) bool { return s.members.Dead(identity) }

// Name is this replica's name.
func (s *Sharder) Name() string { return s.replica.Name }

// NeedLeaderElection is false: every replica runs its own sharder.
func (s *Sharder) NeedLeaderElection() bool { return false }

// settle is how long the sharder waits after a change for more before it assigns again: a burst
// of clusters joining (or the replicas starting together) moves clusters once, not once per event.
const settle = 200 * time.Millisecond

// Start watches the replicas' Leases, holds this replica's, and assigns until ctx ends: when the
// inventory changes (Kick), a replica turns live or leaves, or one's turn runs out unrenewed;
// never per renewal. It returns
// an error when this replica's Lease could not be renewed: the replica must stop, and its clusters
// go to the others.
func (s *Sharder) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("replica", s.replica.Name)
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.replica.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = policyhubv1.LabelReplicaOf + "=" + s.replica.HubID
		}))
	leases := factory.Coordination().V1().Leases().Informer()
	if _, err := leases.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.seen(obj) },
		UpdateFunc: func(_, obj any) { s.seen(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok {
				s.members.Gone(l.Name)
			}
		},
	}); err != nil {
		return fmt.Errorf("watch the replicas' Leases: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop only when ctx ends: cancelled first, or a
	// replica that lost its Lease would wait here for ever instead of stopping.
	defer func() {
		cancel()
		factory.Shutdown()
	}()

	held := make(chan error, 1)
	go func() { held <- Hold(ctx, s.client.CoordinationV1(), s.replica) }()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-held:
			if err == nil {
				return nil
			}
			s.lost.Store(true)
			s.publish(Assignment{})
			logger.Error(err, "this replica lost its Lease: it stops, and its clusters go to the other replicas")
			return err
		case <-s.kick:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(settle):
			}
		case <-expiry.C:
			// A replica's turn ran out unless it was renewed meanwhile (renewals of live replicas
			// are not news): assign again only when the live replicas did change.
			if live, next := s.members.Live(); slices.Equal(live, s.assignedLive) {
				expiry.Reset(untilExpiry(next))
				continue
			}
		}
		next, err := s.assign(ctx)
		if err != nil {
			logger.Error(err, "assign the fleet to the replicas; the last assignment stays")
		}
		expiry.Reset(next)
	}
}

func (s *Sharder) seen(obj any) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		s.members.Seen(l)
	}
}

// assign makes the assignment from the live replicas and the inventory, publishes it when it
// changed, and says how long until a replica expires unless renewed.
func (s *Sharder) assign(ctx context.Context) (time.Duration, error) {
	live, nextExpiry := s.members.Live()
	clusters, err := s.inventory(ctx)
	if err != nil {
		return time.Second, err
	}
	s.assignedLive = live
	if !slices.Contains(live, s.replica.Name) {
		live = nil // not live in its own view yet (or any more): owns nothing
	}
	next := Assign(clusters, live, s.loadFactor)
	if !s.lost.Load() && !next.Same(*s.current.Load()) {
		s.publish(next)
	}
	return untilExpiry(nextExpiry), nil
}

// untilExpiry is how long until nextExpiry (zero: no live replica, an hour).
func untilExpiry(nextExpiry time.Time) time.Duration {
	if nextExpiry.IsZero() {
		return time.Hour
	}
	return max(time.Until(nextExpiry), 10*time.Millisecond)
}

func (s *Sharder) publish(a Assignment) {
	s.current.Store(&a)
	s.mu.Lock()
	listeners := append([]func(Assignment){}, s.listeners...)
	s.mu.Unlock()
	for _, f := range listeners {
		f(a)
	}
}
