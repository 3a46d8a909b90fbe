package push

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// SummaryName is the name of every cluster's summary object in its hub namespace.
const SummaryName = policyhubv1.SummaryName

// LeaseName is the name of the Lease the agent renews in its cluster's hub namespace.
const LeaseName = policyhubv1.AgentLeaseName

// FieldManager is the server-side apply field manager of the agent's writes to the hub.
const FieldManager = "policyhub-agent"

// Defaults of Options.
const (
	DefaultInterval   = 10 * time.Second
	DefaultHeartbeat  = time.Minute
	DefaultMaxBackoff = time.Minute
)

// firstBackoff is the wait after the first failed write; each further failure doubles it, up to
// Options.MaxBackoff.
const firstBackoff = time.Second

// attemptTimeout bounds one write, so a hub that accepts connections but never answers does not
// hold the Pusher forever (changes meanwhile are not lost: they are pushed by the next attempt).
const attemptTimeout = 30 * time.Second

// Options configure a Pusher.
type Options struct {
	// Cluster is the managed cluster's name; required. The hub namespace written to is the cluster name.
	Cluster string
	// Interval is the minimum time between summary pushes; 0 means DefaultInterval (10s). It is
	// how soon an urgent change is pushed; any other waits for the share the hub publishes
	// (status.pacing.pushInterval) when that is longer.
	Interval time.Duration
	// Heartbeat is how often the agent renews its Lease on the hub, so the hub can tell it is
	// alive; the Lease lasts three heartbeats, and the hub marks results stale after three missed
	// renewals. 0 means DefaultHeartbeat (1m). A Heartbeat shorter than Interval acts as Interval,
	// and one shorter than the heartbeat the hub publishes as that.
	// An unchanged summary is never pushed again: liveness is not content.
	Heartbeat time.Duration
	// MaxBackoff caps the wait between retries after failed writes (starting at 1s, doubling);
	// 0 means DefaultMaxBackoff (1m). Lease renewals retry at least once a heartbeat.
	MaxBackoff time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Pusher pushes one cluster's PolicyReportSummary to the hub and renews its Lease there: it
// decides when, and its Writes write. Create it with New; call Run once, or RenewLease and
// PushSummary once each.
type Pusher struct {
	writes   Writes
	opts     Options
	pushes   atomic.Int64
	renewals atomic.Int64

	// mu guards what was learned of the hub's pacing, shared by both loops.
	mu            sync.Mutex
	published     published
	pacingProblem string
	// pushWake, renewWake wake each loop when the pace changed (buffered 1).
	pushWake, renewWake chan struct{}
}

// Writes are the writes a Pusher makes on the hub, and its read of the hub's pacing: the hub's
// API (APIWrites, as New makes it), or, where only a Pusher's timing is under test, a record of
// what it was asked to write. RenewLease calls Renew and Pacing, PushSummary calls Summary, each
// from its own goroutine, one call at a time, under a deadline.
type Writes interface {
	// Renew renews the cluster's Lease with renewTime at, the Lease lasting three beats.
	Renew(ctx context.Context, at time.Time, beat time.Duration) error
	// Summary writes spec as the cluster's summary, generated at at, and returns the pacing the
	// hub publishes in the summary's status, as the write's response says.
	Summary(ctx context.Context, spec policyhubv1.PolicyReportSummarySpec, at time.Time) (PacingRead, error)
	// Pacing reads the pacing the hub publishes in the summary's status; found is false when
	// there is no summary yet.
	Pacing(ctx context.Context) (pacing PacingRead, found bool, err error)
}

// PacingRead is the pacing read back from the hub, unchecked.
type PacingRead struct {
	// Pacing is the summary's status.pacing; nil when it has none (an older hub, or a summary
	// the hub has not seen yet): the agent keeps its own flags.
	Pacing *policyhubv1.SummaryPacing
	// Unreadable says why status.pacing, present, could not be decoded: the pace is kept.
	Unreadable string
}

// New returns a Pusher writing through hub, a client of the hub whose identity may write the
// PolicyReportSummary and the Lease LeaseName in the namespace o.Cluster. hub's scheme must hold
// coordination.k8s.io/v1.
func New(hub client.Client, o Options) (*Pusher, error) {
	if hub == nil {
		return nil, errors.New("push: no hub client")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	// The Lease is applied typed; without its group in the scheme every renewal would fail with
	// a conversion error naming PatchOptions, not the missing registration.
	if s := hub.Scheme(); s == nil || !s.Recognizes(coordinationv1.SchemeGroupVersion.WithKind("Lease")) {
		return nil, errors.New("push: the hub client's scheme lacks coordination.k8s.io/v1 (add k8s.io/api/coordination/v1.AddToScheme): the agent's Lease cannot be applied")
	}
	return newPusher(&APIWrites{hub: hub, cluster: o.Cluster, beat: o.beat()}, o), nil
}

// NewAPIWrites returns the writes New makes, for a Pusher made by NewWith that wraps them (a
// benchmark that stamps each write); o is checked as New checks it.
func NewAPIWrites(hub client.Client, o Options) (*APIWrites, error) {
	p, err := New(hub, o)
	if err != nil {
		return nil, err
	}
	return p.writes.(*APIWrites), nil
}

// NewWith returns a Pusher whose writes go to w instead of the hub's API.
func NewWith(w Writes, o Options) (*Pusher, error) {
	if w == nil {
		return nil, errors.New("push: no writes")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return newPusher(w, o), nil
}

func newPusher(w Writes, o Options) *Pusher {
	return &Pusher{writes: w, opts: o, pushWake: make(chan struct{}, 1), renewWake: make(chan struct{}, 1)}
}

// Write writes spec as the cluster's summary once, as PushSummary does, under the same deadline,
// announcing the current heartbeat, and learns the pacing its response carries: for benchmarks
// that stand for many agents' writes, one Pusher each.
func (p *Pusher) Write(ctx context.Context, spec policyhubv1.PolicyReportSummarySpec, at time.Time) error {
	attempt, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	spec.HeartbeatInterval = &metav1.Duration{Duration: p.pace().Beat}
	pacing, err := p.writes.Summary(attempt, spec, at)
	if err != nil {
		return err
	}
	p.learn(ctx, pacing, "a summary write's response")
	return nil
}

// renew renews the Lease once, under the attempt's deadline, lasting three beats.
func (p *Pusher) renew(ctx context.Context, at time.Time, beat time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	return p.writes.Renew(ctx, at, beat)
}

// withDefaults checks o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Cluster == "" {
		return o, errors.New("push: Options.Cluster is required")
	}
	if errs := validation.IsDNS1123Label(o.Cluster); len(errs) > 0 {
		return o, fmt.Errorf("push: cluster %q is not a valid hub namespace name: %s", o.Cluster, strings.Join(errs, "; "))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", o.Interval}, {"Heartbeat", o.Heartbeat}, {"MaxBackoff", o.MaxBackoff}} {
		if d.v < 0 {
			return o, fmt.Errorf("push: Options.%s is negative (%s)", d.name, d.v)
		}
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// Pushes counts successful summary writes (for tests and metrics).
func (p *Pusher) Pushes() int64 { return p.pushes.Load() }

// Renewals counts successful Lease renewals (for tests and metrics).
func (p *Pusher) Renewals() int64 { return p.renewals.Load() }

// beat is how often the Lease is renewed, and the heartbeat the summary announces: Heartbeat,
// but not shorter than Interval, nor than the heartbeat the hub published.
func (p *Pusher) beat() time.Duration { return p.pace().Beat }

// Pace is what the Pusher keeps to now, its options slowed by the hub's published pacing: the
// least time between two pushes of a change that is not urgent, and the heartbeat.
func (p *Pusher) Pace() (pushInterval, heartbeat time.Duration) {
	pc := p.pace()
	return pc.PushInterval, pc.Beat
}

func (o Options) beat() time.Duration { return max(o.Heartbeat, o.Interval) }

// Run renews the Lease (RenewLease) and pushes the summary (PushSummary), each in its own loop so
// that a hub refusing or stalling one kind of write never holds up the other, until ctx ends;
// then it returns nil. Its arguments are PushSummary's.
func (p *Pusher) Run(ctx context.Context, changed <-chan struct{}, build func() policyhubv1.PolicyReportSummarySpec) error {
	if build == nil {
		return errors.New("push: Run needs a build function")
	}
	var renewing sync.WaitGroup
	renewing.Go(func() { p.RenewLease(ctx) })
	err := p.PushSummary(ctx, changed, build)
	renewing.Wait()
	return err
}

// RenewLease renews the cluster's Lease on the hub at once and then every heartbeat, until ctx
// ends. A failed renewal is retried with backoff (at least once a heartbeat) and logged through
// the logger of ctx when it starts failing, when its error changes and when it recovers, never
// once per attempt. It never touches the summary. After the first renewal, and every
// readPacingEvery renewals after it, it reads the hub's published pacing: a heartbeat the hub
// lengthens is kept from the next renewal on, which applies the whole Lease to last three of it.
func (p *Pusher) RenewLease(ctx context.Context) {
	logger := log.FromContext(ctx).WithValues("cluster", p.opts.Cluster, "lease", LeaseName)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		s       leaseState
		lastErr string
		renewed int // successful renewals, counting to the next read of the pacing
	)
	for {
		if ctx.Err() != nil {
			return
		}
		now := p.opts.Now()
		beat := p.beat()
		if next := decideRenewal(s, beat); next.After(now) {
			timer.Reset(next.Sub(now))
			select {
			case <-ctx.Done():
				return
			case <-p.renewWake: // the heartbeat changed: decide again
			case <-timer.C:
			}
			continue
		}
		at := p.opts.Now()
		if err := p.renew(ctx, at, beat); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.Failures++
			wait := backoff(s.Failures, min(p.opts.MaxBackoff, beat))
			s.RetryAt = p.opts.Now().Add(wait)
			// No stack trace and no line per attempt: an unreachable hub or a hub without the
			// Lease in the agent's Role would repeat the same line every backoff.
			if msg := err.Error(); msg != lastErr {
				logger.Info("renewing the agent's Lease on the hub failed; retrying (summaries are pushed regardless)", "error", msg, "attempt", s.Failures, "retryIn", wait)
				lastErr = msg
			} else {
				logger.V(1).Info("renewing the agent's Lease on the hub failed again", "error", msg, "attempt", s.Failures, "retryIn", wait)
			}
			continue
		}
		switch {
		case s.Failures > 0:
			logger.Info("renewed the agent's Lease on the hub after failed attempts", "failedAttempts", s.Failures)
		case !s.Renewed:
			logger.Info("renewed the agent's Lease on the hub", "leaseDurationSeconds", leaseDurationSeconds(beat))
		default:
			logger.V(1).Info("renewed the agent's Lease on the hub")
		}
		p.renewals.Add(1)
		s, lastErr = leaseState{Renewed: true, LastRenewal: at}, ""
		if renewed%readPacingEvery == 0 {
			p.readPacing(ctx)
		}
		renewed++
	}
}

// PushSummary pushes the summary until ctx ends, then returns nil: once at start, then only when
// its content hash changed. An urgent change (see urgent) is pushed Interval after the last push
// while the reserve of UrgentPushes lasts; any other waits until the cluster's share
// (PushInterval, the hub's published one when longer) has passed since the last push, and is
// then pushed as the latest build: deferred, never lost. changed signals (coalesced; a channel
// buffered 1 suits) that the content may have changed; a nil channel means it never does. build
// returns the current summary spec with its ContentHash set; PushSummary sets Cluster,
// GeneratedAt and HeartbeatInterval. build is called from PushSummary's goroutine, right before
// every write attempt, and on a change signal once Interval has passed, to compare hashes and
// judge urgency.
//
// PushSummary never returns on hub errors: it logs them through the logger of ctx and retries
// with backoff, rebuilding before each attempt, so the write that succeeds after an outage
// carries the latest content. It never renews the Lease (see RenewLease).
func (p *Pusher) PushSummary(ctx context.Context, changed <-chan struct{}, build func() policyhubv1.PolicyReportSummarySpec) error {
	if build == nil {
		return errors.New("push: PushSummary needs a build function")
	}
	logger := log.FromContext(ctx).WithValues("cluster", p.opts.Cluster)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var s state
	for {
		if ctx.Err() != nil {
			return nil
		}
		now := p.opts.Now()
		pc := p.pace()
		next, force := decide(s, now, pc)
		if next.IsZero() || next.After(now) {
			// Since Go 1.23 Reset and Stop need no draining: no stale tick is delivered after them.
			var tick <-chan time.Time
			if next.IsZero() {
				timer.Stop() // nothing is due until a change is signalled
			} else {
				timer.Reset(next.Sub(now))
				tick = timer.C
			}
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				s.Pending = true
			case <-p.pushWake: // the share changed: decide again
			case <-tick:
			}
			continue
		}

		spec := build()
		// The build covers every change signalled so far; a later signal waits in the channel.
		s.Pending = false
		if !needsWrite(force, spec.ContentHash, s.LastHash) {
			s.Deferred = false // back to what the hub holds
			continue
		}
		isUrgent := urgent(s.LastSpec, spec)
		if !force && !mayPush(s, now, pc, isUrgent) {
			s.Deferred = true
			continue
		}
		at := p.opts.Now()
		err := p.Write(ctx, spec, at)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.Failures++
			wait := backoff(s.Failures, p.opts.MaxBackoff)
			s.RetryAt = p.opts.Now().Add(wait)
			logger.Error(err, "push the summary to the hub; retrying", "attempt", s.Failures, "retryIn", wait)
			continue
		}
		if s.Failures > 0 {
			logger.Info("pushed the summary to the hub after failed attempts", "failedAttempts", s.Failures, "contentHash", spec.ContentHash)
		} else {
			logger.V(1).Info("pushed the summary to the hub", "contentHash", spec.ContentHash, "urgent", isUrgent)
		}
		p.pushes.Add(1)
		done := p.opts.Now()
		s = state{Pushed: true, LastPush: done, LastHash: spec.ContentHash, LastSpec: &spec, reserve: s.spend(done, pc.PushInterval)}
	}
}

// leaseDurationSeconds is three heartbeats of beat in whole seconds, rounded up (at most what
// the field holds).
func leaseDurationSeconds(beat time.Duration) int32 {
	if beat >= math.MaxInt32/3*time.Second {
		return math.MaxInt32
	}
	return int32((3*beat + time.Second - 1) / time.Second)
}

// state is what PushSummary knows between two decisions.
type state struct {
	// Pushed: a write has succeeded.
	Pushed bool
	// LastPush is when the last successful write ended.
	LastPush time.Time
	// LastHash is the ContentHash of the last successful write.
	LastHash string
	// LastSpec is the last successful write's spec, what urgency is judged against.
	LastSpec *policyhubv1.PolicyReportSummarySpec
	// Pending: a change was signalled and not yet looked at.
	Pending bool
	// Deferred: a build differed from the last push, not urgently (or with the reserve spent);
	// it is pushed once the share has passed.
	Deferred bool
	// Failures counts write attempts failed since the last success.
	Failures int
	// RetryAt is the earliest next attempt after a failure.
	RetryAt time.Time
	reserve
}

// reserve is the pushes spent of UrgentPushes; one is refilled every PushInterval. Its zero
// value is full.
//
// Every push spends one, not only the urgent ones: the hub sizes PushInterval as the cluster's
// whole share of its API server, so over time an agent pushes at most once a PushInterval, with
// bursts of UrgentPushes. A push that waited its share always finds one: one is refilled in any
// PushInterval after a push.
type reserve struct {
	// Spent is how many of UrgentPushes were spent, as of SpentAt.
	Spent int
	// SpentAt is when the refill clock last started or advanced: the next push is refilled a
	// PushInterval after it.
	SpentAt time.Time
}

// left is how many pushes are left in the reserve at now, refilled every every, and when the next
// is refilled (zero when full).
func (r reserve) left(now time.Time, every time.Duration) (left int, refill time.Time) {
	r = r.refilled(now, every)
	if r.Spent == 0 {
		return policyhubv1.UrgentPushes, time.Time{}
	}
	return policyhubv1.UrgentPushes - r.Spent, r.SpentAt.Add(every)
}

// refilled is r with the pushes refilled by now.
func (r reserve) refilled(now time.Time, every time.Duration) reserve {
	if r.Spent <= 0 || every <= 0 {
		return reserve{}
	}
	n := int(min(max(now.Sub(r.SpentAt)/every, 0), policyhubv1.UrgentPushes))
	if n >= r.Spent {
		return reserve{}
	}
	return reserve{Spent: r.Spent - n, SpentAt: r.SpentAt.Add(time.Duration(n) * every)}
}

// spend is r with one push spent at now (none to spend: it stays empty).
func (r reserve) spend(now time.Time, every time.Duration) reserve {
	r = r.refilled(now, every)
	if r.Spent == 0 {
		r.SpentAt = now // full until now: the refill clock starts
	}
	r.Spent = min(r.Spent+1, policyhubv1.UrgentPushes)
	return r
}

// decide says when PushSummary next builds the summary (next; at or before now means now; zero
// means not until a change is signalled) and whether that build is written even if its hash is
// the last pushed one (force):
//   - nothing pushed yet and no failure: now, forced (the push at start);
//   - after a failure: at RetryAt (not sooner than Interval after the last success), forced,
//     because whether the failed write landed is unknown;
//   - a change pending: Interval after the last push, or when the reserve next refills if it is
//     empty (no push can be made sooner), written only if the hash changed (and mayPush);
//   - a change deferred: PushInterval after the last push (or sooner, for a change pending);
//   - otherwise: not until a change is signalled. An unchanged summary is never pushed again;
//     the Lease says the agent is alive.
func decide(s state, now time.Time, pc pace) (next time.Time, force bool) {
	if s.Failures > 0 {
		next = s.RetryAt
		if s.Pushed {
			next = later(next, s.LastPush.Add(pc.Interval))
		}
		return next, true
	}
	if !s.Pushed {
		return now, true
	}
	if s.Deferred {
		next = s.LastPush.Add(pc.PushInterval)
	}
	if s.Pending {
		look := s.LastPush.Add(pc.Interval)
		if left, refill := s.left(now, pc.PushInterval); left == 0 {
			look = later(look, refill)
		}
		if next.IsZero() || look.Before(next) {
			next = look
		}
	}
	return next, false
}

// mayPush says whether a build that differs from the last push is pushed at now (decide has
// kept Interval since it): once the share has passed since the last push; sooner only when
// urgent, spending one of the reserve.
func mayPush(s state, now time.Time, pc pace, urgent bool) bool {
	if !now.Before(s.LastPush.Add(pc.PushInterval)) {
		return true
	}
	if !urgent || now.Before(s.LastPush.Add(pc.Interval)) {
		return false
	}
	left, _ := s.left(now, pc.PushInterval)
	return left > 0
}

// leaseState is what RenewLease knows between two renewals.
type leaseState struct {
	// Renewed: a renewal has succeeded.
	Renewed bool
	// LastRenewal is the renewTime of the last successful renewal.
	LastRenewal time.Time
	// Failures counts renewals failed since the last success.
	Failures int
	// RetryAt is the next attempt after a failure.
	RetryAt time.Time
}

// decideRenewal says when RenewLease next renews the Lease (at or before now means now): at start
// at once, then a heartbeat after the last renewal's renewTime, and after a failure at RetryAt.
// Summary pushes do not move it, so the Lease alone is a complete record of liveness.
func decideRenewal(s leaseState, beat time.Duration) time.Time {
	switch {
	case s.Failures > 0:
		return s.RetryAt
	case !s.Renewed:
		return time.Time{}
	default:
		return s.LastRenewal.Add(beat)
	}
}

// needsWrite says whether a build with content hash hash is written: when forced, when it differs
// from the last pushed one, or when it has no hash (nothing to compare).
func needsWrite(force bool, hash, lastHash string) bool {
	return force || hash == "" || hash != lastHash
}

// backoff is the wait after the failures-th consecutive failed attempt: 1s, doubling, at most
// maxWait. PushSummary and RenewLease count their failures apart.
func backoff(failures int, maxWait time.Duration) time.Duration {
	d := firstBackoff
	for i := 1; i < failures && d < maxWait; i++ {
		d *= 2
	}
	return min(d, maxWait)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
