package shard

import (
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Members are the replicas of one hub as their Leases show them, judged by the hub's clock: a
// replica is live while its Lease has a holder and the hub saw it renewed within the Lease's
// duration. A Lease's renewTime is the replica's own clock: it stands in only for a Lease the hub
// has not seen change yet (after a restart), and never later than now. Safe for concurrent use.
type Members struct {
	hubID string
	now   func() time.Time

	mu      sync.Mutex
	leases  map[string]member // by replica name
	changed func()
	// holders are the replica each holder identity was last seen holding the Lease of, and when:
	// an identity no longer holding it (released, replaced by a restart) or whose Lease ran out is
	// a process of this hub known dead (see Dead). A process seen last longer than forgetHolder
	// ago is forgotten: any sync Lease it still holds has been unrenewed far longer than a Lease
	// lasts, and is taken by the ordinary rule; so restarts do not grow the map without bound.
	holders map[string]holderSeen
}

// holderSeen is which replica's Lease a process held, and when it was last seen holding it.
type holderSeen struct {
	replica string
	at      time.Time
}

// forgetHolder is how long after it was last seen holding its Lease a replica process is
// forgotten (Dead then says false for it: the ordinary expiry rule applies).
const forgetHolder = time.Hour

type member struct {
	resourceVersion string
	held            bool
	holder          string
	heard           time.Time
	duration        time.Duration
}

// NewMembers returns the members of hub hubID, none yet; now is the hub's clock (nil: time.Now).
func NewMembers(hubID string, now func() time.Time) *Members {
	if now == nil {
		now = time.Now
	}
	return &Members{hubID: hubID, now: now, leases: map[string]member{}, holders: map[string]holderSeen{}}
}

// maxLeaseDuration bounds what a Lease may claim: a Lease saying it lasts a day must not keep a
// dead replica's clusters unworked for a day.
const maxLeaseDuration = 4 * LeaseDuration

// Seen records a replica Lease as the watch delivers it (created, updated, or listed). A Lease of
// another hub, or not named as a replica's, is ignored.
func (m *Members) Seen(lease *coordinationv1.Lease) {
	name := policyhubv1.ReplicaFromLease(m.hubID, lease.Name)
	if name == "" || lease.Labels[policyhubv1.LabelReplicaOf] != m.hubID {
		return
	}
	now := m.now()
	duration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, int32(LeaseDuration/time.Second))) * time.Second
	duration = min(max(duration, time.Second), maxLeaseDuration)
	m.mu.Lock()
	prev, known := m.leases[name]
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	next := member{resourceVersion: lease.ResourceVersion, held: holder != "", holder: holder, duration: duration, heard: prev.heard}
	switch {
	case known && prev.resourceVersion == lease.ResourceVersion:
		// An informer's resync: nothing was renewed.
	case known:
		next.heard = now
	default:
		if t := lease.Spec.RenewTime; t != nil {
			next.heard = t.Time
			if next.heard.After(now) {
				next.heard = now
			}
		}
	}
	m.leases[name] = next
	if holder != "" {
		m.holders[holder] = holderSeen{replica: name, at: now}
	}
	for id, h := range m.holders {
		if now.Sub(h.at) > forgetHolder {
			delete(m.holders, id)
		}
	}
	m.mu.Unlock()
	// A renewal of a live replica changes nothing: only a replica turning live (or released) is
	// news; one running out is the expiry's, which Live says when to look for.
	if next.liveAt(now) != (known && prev.liveAt(now)) {
		m.notify()
	}
}

// liveAt says whether the member is live at now.
func (l member) liveAt(now time.Time) bool {
	return l.held && l.heard.Add(l.duration).After(now)
}

// Gone forgets a deleted replica Lease.
func (m *Members) Gone(leaseName string) {
	name := policyhubv1.ReplicaFromLease(m.hubID, leaseName)
	if name == "" {
		return
	}
	m.mu.Lock()
	delete(m.leases, name)
	m.mu.Unlock()
	m.notify()
}

// Live are the live replicas' names, sorted, and when the next of them expires unless renewed
// (zero: none live).
func (m *Members) Live() (live []string, nextExpiry time.Time) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, l := range m.leases {
		if !l.liveAt(now) {
			continue
		}
		expiry := l.heard.Add(l.duration)
		live = append(live, name)
		if nextExpiry.IsZero() || expiry.Before(nextExpiry) {
			nextExpiry = expiry
		}
	}
	slices.Sort(live)
	return live, nextExpiry
}

// OnChange sets what is called (outside the lock) when a Lease event may have changed the live
// set: a replica turning live, released or deleted (not a renewal of a live one).
func (m *Members) OnChange(f func()) {
	m.mu.Lock()
	m.changed = f
	m.mu.Unlock()
}

func (m *Members) notify() {
	m.mu.Lock()
	f := m.changed
	m.mu.Unlock()
	if f != nil {
		f()
	}
}

// Dead says whether identity is a holder of one of this hub's replica Leases that membership
// has judged dead by the hub's clock: its Lease ran out unrenewed, was released, deleted, or is
// held by another identity now (the replica restarted). An identity never seen holding a replica
// Lease of this hub (another hub's process, the CLI, a Lease not listed yet) is not dead: false.
//
// A replica that cannot renew its Lease stops working its clusters after RenewDeadline by its own
// clock, LeaseDuration−RenewDeadline before the hub judges it dead by its clock: what a dead
// holder left unfinished may be taken over at once without two writers.
func (m *Members) Dead(identity string) bool {
	if identity == "" {
		return false
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	h, known := m.holders[identity]
	if !known {
		return false
	}
	l, present := m.leases[h.replica]
	return !present || l.holder != identity || !l.liveAt(now)
}

// LiveAt are the replicas of hubID whose Leases are held and not expired at now by their own
// renewTime, sorted: for readers that have not watched them renew (the CLI, tests), and so trust
// the replicas' clocks; the hub judges by its own (Members). A Lease claims at most
// maxLeaseDuration.
func LiveAt(hubID string, leases []coordinationv1.Lease, now time.Time) []string {
	var live []string
	for _, l := range leases {
		name := policyhubv1.ReplicaFromLease(hubID, l.Name)
		if name == "" || l.Labels[policyhubv1.LabelReplicaOf] != hubID || ptr.Deref(l.Spec.HolderIdentity, "") == "" || l.Spec.RenewTime == nil {
			continue
		}
		duration := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, int32(LeaseDuration/time.Second))) * time.Second
		if l.Spec.RenewTime.Add(min(max(duration, time.Second), maxLeaseDuration)).After(now) {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	return slices.Compact(live)
}
