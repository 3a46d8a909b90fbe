package push

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/internal/logtest"
)

// These tests run a Pusher's loops inside a synctest bubble, time virtual, so hours of
// heartbeats take no time, and synctest.Wait returns once every loop is blocked on its next timer
// or signal. What they test is when the Pusher writes: its writes go to a record (writeLog), not
// to an API. What the writes do on a real hub (apply, then patch; apply again after a deletion;
// the fields the agent owns) is tested against the local fleet's kube-apiserver in e2e.

const (
	testCluster   = "cluster-1"
	testInterval  = 10 * time.Second
	testHeartbeat = time.Minute
)

// The kinds of write a Pusher makes.
const (
	leaseWrite   = "Lease"
	summaryWrite = "PolicyReportSummary"
)

// writeLog records the writes a Pusher asks for, by kind: the attempts, the ones that landed,
// the last renewal time and summary landed; and refuses or stalls one kind on demand.
type writeLog struct {
	mu          sync.Mutex
	attempts    map[string]int
	landed      map[string]int
	fail        map[string]func(context.Context) error
	lastRenewal time.Time
	lastSummary *policyhubv1.PolicyReportSummarySpec
	summaryAt   time.Time
	// summaries are every summary landed; beats the beat of every renewal landed.
	summaries []landedSummary
	beats     []time.Duration
	// pacing is what the hub publishes; pacingReads counts the reads of it.
	pacing      *policyhubv1.SummaryPacing
	pacingReads int
}

type landedSummary struct {
	spec policyhubv1.PolicyReportSummarySpec
	at   time.Time
}

func newWriteLog() *writeLog {
	return &writeLog{attempts: map[string]int{}, landed: map[string]int{}, fail: map[string]func(context.Context) error{}}
}

// attempt counts an attempt of kind and says whether it lands (nil) or what it fails with.
func (l *writeLog) attempt(ctx context.Context, kind string) error {
	l.mu.Lock()
	l.attempts[kind]++
	fail := l.fail[kind]
	l.mu.Unlock()
	if fail != nil {
		return fail(ctx)
	}
	l.mu.Lock()
	l.landed[kind]++
	l.mu.Unlock()
	return nil
}

func (l *writeLog) Renew(ctx context.Context, at time.Time, beat time.Duration) error {
	if err := l.attempt(ctx, leaseWrite); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastRenewal = at
	l.beats = append(l.beats, beat)
	return nil
}

func (l *writeLog) Summary(ctx context.Context, spec policyhubv1.PolicyReportSummarySpec, at time.Time) (PacingRead, error) {
	if err := l.attempt(ctx, summaryWrite); err != nil {
		return PacingRead{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSummary, l.summaryAt = &spec, at
	l.summaries = append(l.summaries, landedSummary{spec: spec, at: at})
	return PacingRead{Pacing: l.pacing}, nil
}

// Pacing is what the hub publishes, as a write's response says it (a summary is there once one
// landed).
func (l *writeLog) Pacing(context.Context) (PacingRead, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pacingReads++
	return PacingRead{Pacing: l.pacing}, l.landed[summaryWrite] > 0, nil
}

// publish makes the hub publish pacing (nil: none) from now on.
func (l *writeLog) publish(pushInterval, heartbeat time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pacing = &policyhubv1.SummaryPacing{PushInterval: metav1.Duration{Duration: pushInterval},
		HeartbeatInterval: metav1.Duration{Duration: heartbeat}, Clusters: 1000}
}

// failing makes every write of kind answer what fail returns (nil: they land again).
func (l *writeLog) failing(kind string, fail func(context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[kind] = fail
}

func (l *writeLog) counts(kind string) (attempts, landed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts[kind], l.landed[kind]
}

// summary is the last summary landed, and when it was generated.
func (l *writeLog) summary(t *testing.T) (policyhubv1.PolicyReportSummarySpec, time.Time) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastSummary == nil {
		t.Fatal("no summary landed")
	}
	return *l.lastSummary, l.summaryAt
}

func (l *writeLog) renewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastRenewal
}

// refused is a hub answer that is not the agent's fault to fix.
func refused(kind string) func(context.Context) error {
	return func(context.Context) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: kind}, "x", errors.New("not in the agent's Role"))
	}
}

// stalled is a hub that accepts the request and never answers: the attempt ends at its timeout.
func stalled(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// content stands for collect+summarize: a content hash the test changes, and the builds made.
// The fail count is urgent to push; the hash alone (pass counts) is not.
type content struct {
	mu     sync.Mutex
	hash   string
	fail   int64
	builds int
}

func (c *content) set(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hash = hash
}

// setFail sets the fail count, with a hash that says so.
func (c *content) setFail(fail int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = fail
	c.hash = fmt.Sprintf("fail-%d", fail)
}

func (c *content) build() policyhubv1.PolicyReportSummarySpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.builds++
	return policyhubv1.PolicyReportSummarySpec{ContentHash: c.hash, Totals: policyhubv1.ResultCounts{Pass: int64(len(c.hash)), Fail: c.fail}}
}

// run is a Pusher running in the bubble until stop.
type run struct {
	*Pusher
	changed chan struct{}
	src     *content
	logs    *logtest.Lines
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, hub Writes, o Options) *run {
	t.Helper()
	p, err := NewWith(hub, o)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Lines{}
	ctx, cancel := context.WithCancel(logs.Context(context.Background()))
	r := &run{Pusher: p, changed: make(chan struct{}, 1), src: &content{hash: "v1"}, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx, r.changed, r.src.build) }()
	synctest.Wait()
	return r
}

func (r *run) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// stop ends Run; it must return nil at once (both loops end with the context).
func (r *run) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	synctest.Wait()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	default:
		t.Error("Run did not return when its context ended")
	}
}

// advance moves virtual time by d and lets every loop do what is due.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func defaultOptions() Options {
	return Options{Cluster: testCluster, Interval: testInterval, Heartbeat: testHeartbeat}
}

// Liveness is not content: over five heartbeats with nothing new, the summary is written once (at
// start) and the Lease renewed every heartbeat; a change signal with unchanged content writes
// nothing either.
func TestQuietClusterRenewsTheLeaseOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		r := start(t, hub, defaultOptions())
		if r.Pushes() != 1 || r.Renewals() != 1 {
			t.Fatalf("at start: %d pushes, %d renewals; want 1 and 1", r.Pushes(), r.Renewals())
		}
		for beat := 1; beat <= 5; beat++ {
			advance(testHeartbeat / 2)
			r.signal() // same content
			advance(testHeartbeat / 2)
			if got := r.Renewals(); got != int64(1+beat) {
				t.Errorf("after %d heartbeats: %d renewals, want %d", beat, got, 1+beat)
			}
		}
		if _, landed := hub.counts(leaseWrite); landed < 6 {
			t.Errorf("%d Lease writes reached the hub, want at least 6", landed)
		}
		if attempts, landed := hub.counts(summaryWrite); attempts != 1 || landed != 1 || r.Pushes() != 1 {
			t.Errorf("summary: %d writes, %d landed, Pushes() %d; want exactly 1 (at start)", attempts, landed, r.Pushes())
		}
		if r.src.builds < 6 {
			t.Errorf("%d builds: the change signals were not looked at", r.src.builds)
		}
		r.stop(t)
	})
}

// A change is pushed once Interval has passed since the last push, not sooner, and not with the
// Lease's cadence.
func TestChangePushedAfterInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		r := start(t, hub, defaultOptions())
		advance(2 * time.Second)
		r.src.set("v2")
		r.signal()
		advance(testInterval - 2*time.Second - time.Millisecond)
		if r.Pushes() != 1 {
			t.Fatalf("%d pushes before the interval passed, want 1", r.Pushes())
		}
		advance(time.Millisecond)
		if r.Pushes() != 2 {
			t.Fatalf("%d pushes once the interval passed, want 2", r.Pushes())
		}
		s, generated := hub.summary(t)
		if s.ContentHash != "v2" {
			t.Errorf("the hub's summary holds %q, want v2", s.ContentHash)
		}
		if want := time.Now(); !generated.Equal(want) {
			t.Errorf("generated at %s, want the push's time %s", generated, want)
		}
		// A change right after that push waits for the next interval too.
		r.src.set("v3")
		r.signal()
		advance(testInterval - time.Millisecond)
		if r.Pushes() != 2 {
			t.Errorf("%d pushes within the interval after the last, want 2", r.Pushes())
		}
		advance(time.Millisecond)
		if s, _ := hub.summary(t); r.Pushes() != 3 || s.ContentHash != "v3" {
			t.Errorf("%d pushes, hub holds %q; want 3 and v3", r.Pushes(), s.ContentHash)
		}
		if r.Renewals() != 1 {
			t.Errorf("%d renewals within the first heartbeat, want 1: pushes do not renew the Lease", r.Renewals())
		}
		r.stop(t)
	})
}

// A hub that refuses or stalls summaries still gets every renewal on time; once it takes
// summaries again, the latest content lands (forced: whether a failed write landed is unknown).
func TestLeaseRenewedWhileSummariesFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(context.Context) error
	}{{"refused", refused("policyreportsummaries")}, {"stalled", stalled}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hub := newWriteLog()
				hub.failing(summaryWrite, tc.fail)
				r := start(t, hub, defaultOptions())
				for beat := 1; beat <= 3; beat++ {
					advance(testHeartbeat)
					if got := r.Renewals(); got != int64(1+beat) {
						t.Errorf("after %d heartbeats with summaries failing: %d renewals, want %d", beat, got, 1+beat)
					}
				}
				if attempts, _ := hub.counts(summaryWrite); r.Pushes() != 0 || attempts < 2 {
					t.Errorf("Pushes() %d, %d summary attempts; want 0 pushes and retries", r.Pushes(), attempts)
				}
				r.src.set("v2")
				r.signal()
				hub.failing(summaryWrite, nil)
				advance(DefaultMaxBackoff + attemptTimeout)
				if s, _ := hub.summary(t); r.Pushes() != 1 || s.ContentHash != "v2" {
					t.Errorf("after the hub recovered: Pushes() %d, want 1 with the latest content v2", r.Pushes())
				}
				r.stop(t)
			})
		})
	}
}

// A hub that refuses or stalls the Lease (say, the agent's Role predates it) still gets the
// summary at start and on changes; the failure is logged once, not once per retry, and the
// retries come at least once a heartbeat.
func TestSummariesPushedWhileLeaseFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(context.Context) error
	}{{"refused", refused("leases")}, {"stalled", stalled}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hub := newWriteLog()
				hub.failing(leaseWrite, tc.fail)
				o := defaultOptions()
				o.MaxBackoff = time.Hour
				r := start(t, hub, o)
				if r.Pushes() != 1 {
					t.Errorf("%d pushes at start with the Lease failing, want 1", r.Pushes())
				}
				r.src.set("v2")
				r.signal()
				advance(testInterval)
				if s, _ := hub.summary(t); r.Pushes() != 2 || s.ContentHash != "v2" {
					t.Errorf("%d pushes after a change with the Lease failing, want 2 (v2 on the hub)", r.Pushes())
				}
				advance(10 * testHeartbeat)
				if r.Renewals() != 0 {
					t.Errorf("%d renewals counted although every one failed", r.Renewals())
				}
				// Backoff 1s, 2s, 4s … capped at the heartbeat, not at MaxBackoff's hour; a stalled
				// attempt takes its 30s timeout on top.
				if attempts, _ := hub.counts(leaseWrite); attempts < 10 {
					t.Errorf("%d renewal attempts in eleven heartbeats, want at least 10", attempts)
				}
				if n := r.logs.Count("renewing the agent's Lease on the hub failed"); n != 1 {
					t.Errorf("the renewal failure was logged %d times at V(0), want once (same error each time)", n)
				}
				hub.failing(leaseWrite, nil)
				advance(testHeartbeat + attemptTimeout)
				if r.Renewals() != 1 {
					t.Errorf("%d renewals after the hub took Leases again, want 1", r.Renewals())
				}
				if n := r.logs.Count("renewed the agent's Lease on the hub after failed attempts"); n != 1 {
					t.Errorf("the recovery was logged %d times, want once", n)
				}
				r.stop(t)
			})
		})
	}
}

// The Lease is renewed as of now, advancing a heartbeat at each renewal (what the Lease holds
// is leaseObject's: TestLeaseObject).
func TestLeaseRenewedAsOfNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		startedAt := time.Now()
		r := start(t, hub, defaultOptions())
		for beat := range 3 {
			if want := startedAt.Add(time.Duration(beat) * testHeartbeat); !hub.renewedAt().Equal(want) {
				t.Errorf("renewal %d as of %s, want %s", beat, hub.renewedAt(), want)
			}
			advance(testHeartbeat)
		}
		r.stop(t)
	})
}

// A Heartbeat shorter than Interval acts as Interval, for the Lease as for the summary's
// announced heartbeat, so the two never disagree.
func TestShortHeartbeatActsAsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		r := start(t, hub, Options{Cluster: testCluster, Interval: 10 * time.Second, Heartbeat: 2 * time.Second})
		advance(10*time.Second - time.Millisecond)
		if r.Renewals() != 1 {
			t.Errorf("%d renewals before the interval passed, want 1", r.Renewals())
		}
		advance(time.Millisecond)
		if r.Renewals() != 2 {
			t.Errorf("%d renewals once the interval passed, want 2", r.Renewals())
		}
		if d := r.writes.(*writeLog); d != hub {
			t.Fatal("the Pusher writes elsewhere")
		}
		if beat := r.beat(); beat != 10*time.Second {
			t.Errorf("the Lease's beat (and the summary's announced heartbeat) %s, want 10s", beat)
		}
		r.stop(t)
	})
}

// RenewLease alone (as agent.Run starts it before the cluster is read) renews with no summary.
func TestRenewLeaseAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		p, err := NewWith(hub, defaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.RenewLease(ctx) }()
		synctest.Wait()
		if p.Renewals() != 1 {
			t.Errorf("%d renewals right after start, want 1", p.Renewals())
		}
		if attempts, _ := hub.counts(summaryWrite); attempts != 0 {
			t.Errorf("RenewLease applied the summary %d times", attempts)
		}
		cancel()
		<-done
	})
}

func TestNewNeedsCoordinationInTheScheme(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if _, err := New(unreachableHub(t, scheme), Options{Cluster: testCluster}); err == nil || !strings.Contains(err.Error(), "coordination.k8s.io/v1") {
		t.Errorf("New with a scheme without coordination.k8s.io/v1: error %v, want one naming it", err)
	}
}

// After a failed write the hub's summary is unknown (the write may have landed), so the next
// attempt writes even content whose hash equals the last successful push's.
func TestRetryAfterFailureIsForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		r := start(t, hub, defaultOptions())
		hub.failing(summaryWrite, refused("policyreportsummaries"))
		r.src.set("v2")
		r.signal()
		advance(testInterval)
		if attempts, _ := hub.counts(summaryWrite); attempts != 2 {
			t.Fatalf("%d summary attempts, want 2 (start, then v2 refused)", attempts)
		}
		r.src.set("v1") // back to what the last successful push held
		hub.failing(summaryWrite, nil)
		advance(testInterval)
		if r.Pushes() != 2 {
			t.Errorf("Pushes() %d: the retry of content equal to the last push was skipped, want it written", r.Pushes())
		}
		r.stop(t)
	})
}
