package push

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/internal/logtest"
)

// These tests run Pusher.Run against controller-runtime's fake client (which serves server-side
// apply) inside a synctest bubble: time is virtual, so hours of heartbeats take no time, and
// synctest.Wait returns once every loop is blocked on its next timer or signal.

const (
	testCluster   = "cluster-1"
	testInterval  = 10 * time.Second
	testHeartbeat = time.Minute
)

// fakeHub is the hub's API: a fake client that counts, by kind, the writes (applies, and the
// Lease's renewal patches) that reached it and the ones that landed, and refuses or stalls one kind on demand.
type fakeHub struct {
	client.WithWatch
	mu       sync.Mutex
	attempts map[string]int
	landed   map[string]int
	fail     map[string]func(context.Context) error
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := policyhubv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &fakeHub{attempts: map[string]int{}, landed: map[string]int{}, fail: map[string]func(context.Context) error{}}
	h.WithWatch = fake.NewClientBuilder().WithScheme(scheme).WithReturnManagedFields().
		WithInterceptorFuncs(interceptor.Funcs{Apply: h.apply, Patch: h.patch}).Build()
	return h
}

// patch counts a Lease renewal's patch as its kind's write, like an apply.
func (h *fakeHub) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	kind := "Lease"
	if _, ok := obj.(*coordinationv1.Lease); !ok {
		return c.Patch(ctx, obj, patch, opts...)
	}
	h.mu.Lock()
	h.attempts[kind]++
	fail := h.fail[kind]
	h.mu.Unlock()
	if fail != nil {
		return fail(ctx)
	}
	if err := c.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	h.mu.Lock()
	h.landed[kind]++
	h.mu.Unlock()
	return nil
}

func (h *fakeHub) apply(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var typ metav1.TypeMeta
	if err := json.Unmarshal(data, &typ); err != nil {
		return err
	}
	h.mu.Lock()
	h.attempts[typ.Kind]++
	fail := h.fail[typ.Kind]
	h.mu.Unlock()
	if fail != nil {
		return fail(ctx)
	}
	if err := c.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	h.mu.Lock()
	h.landed[typ.Kind]++
	h.mu.Unlock()
	return nil
}

// failing makes every apply of kind answer what fail returns (nil: they land again).
func (h *fakeHub) failing(kind string, fail func(context.Context) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail[kind] = fail
}

func (h *fakeHub) counts(kind string) (attempts, landed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attempts[kind], h.landed[kind]
}

func (h *fakeHub) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := h.Get(context.Background(), client.ObjectKey{Namespace: testCluster, Name: LeaseName}, l); err != nil {
		t.Fatalf("the Lease on the hub: %v", err)
	}
	return l
}

func (h *fakeHub) summary(t *testing.T) *policyhubv1.PolicyReportSummary {
	t.Helper()
	s := &policyhubv1.PolicyReportSummary{}
	if err := h.Get(context.Background(), client.ObjectKey{Namespace: testCluster, Name: SummaryName}, s); err != nil {
		t.Fatalf("the summary on the hub: %v", err)
	}
	return s
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
type content struct {
	mu     sync.Mutex
	hash   string
	builds int
}

func (c *content) set(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hash = hash
}

func (c *content) build() policyhubv1.PolicyReportSummarySpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.builds++
	return policyhubv1.PolicyReportSummarySpec{ContentHash: c.hash, Totals: policyhubv1.ResultCounts{Pass: int64(len(c.hash))}}
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

func start(t *testing.T, hub client.Client, o Options) *run {
	t.Helper()
	p, err := New(hub, o)
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
		hub := newFakeHub(t)
		r := start(t, hub, defaultOptions())
		first := hub.summary(t)
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
		if _, landed := hub.counts("Lease"); landed < 6 {
			t.Errorf("%d Lease writes reached the hub, want at least 6", landed)
		}
		if attempts, landed := hub.counts("PolicyReportSummary"); attempts != 1 || landed != 1 || r.Pushes() != 1 {
			t.Errorf("summary: %d applies, %d landed, Pushes() %d; want exactly 1 (at start)", attempts, landed, r.Pushes())
		}
		if r.src.builds < 6 {
			t.Errorf("%d builds: the change signals were not looked at", r.src.builds)
		}
		if s := hub.summary(t); s.ResourceVersion != first.ResourceVersion {
			t.Errorf("the summary was rewritten (resourceVersion %s → %s) with nothing new", first.ResourceVersion, s.ResourceVersion)
		}
		r.stop(t)
	})
}

// A change is pushed once Interval has passed since the last push, not sooner, and not with the
// Lease's cadence.
func TestChangePushedAfterInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newFakeHub(t)
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
		s := hub.summary(t)
		if s.Spec.ContentHash != "v2" {
			t.Errorf("the hub's summary holds %q, want v2", s.Spec.ContentHash)
		}
		if want := time.Now(); s.Spec.GeneratedAt == nil || !s.Spec.GeneratedAt.Time.Equal(want.Truncate(time.Second)) {
			t.Errorf("spec.generatedAt %v, want the push's time %s", s.Spec.GeneratedAt, want)
		}
		if s.Spec.HeartbeatInterval == nil || s.Spec.HeartbeatInterval.Duration != testHeartbeat {
			t.Errorf("spec.heartbeatInterval %v, want %s", s.Spec.HeartbeatInterval, testHeartbeat)
		}
		// A change right after that push waits for the next interval too.
		r.src.set("v3")
		r.signal()
		advance(testInterval - time.Millisecond)
		if r.Pushes() != 2 {
			t.Errorf("%d pushes within the interval after the last, want 2", r.Pushes())
		}
		advance(time.Millisecond)
		if r.Pushes() != 3 || hub.summary(t).Spec.ContentHash != "v3" {
			t.Errorf("%d pushes, hub holds %q; want 3 and v3", r.Pushes(), hub.summary(t).Spec.ContentHash)
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
				hub := newFakeHub(t)
				hub.failing("PolicyReportSummary", tc.fail)
				r := start(t, hub, defaultOptions())
				for beat := 1; beat <= 3; beat++ {
					advance(testHeartbeat)
					if got := r.Renewals(); got != int64(1+beat) {
						t.Errorf("after %d heartbeats with summaries failing: %d renewals, want %d", beat, got, 1+beat)
					}
				}
				if attempts, _ := hub.counts("PolicyReportSummary"); r.Pushes() != 0 || attempts < 2 {
					t.Errorf("Pushes() %d, %d summary attempts; want 0 pushes and retries", r.Pushes(), attempts)
				}
				r.src.set("v2")
				r.signal()
				hub.failing("PolicyReportSummary", nil)
				advance(DefaultMaxBackoff + attemptTimeout)
				if r.Pushes() != 1 || hub.summary(t).Spec.ContentHash != "v2" {
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
				hub := newFakeHub(t)
				hub.failing("Lease", tc.fail)
				o := defaultOptions()
				o.MaxBackoff = time.Hour
				r := start(t, hub, o)
				if r.Pushes() != 1 {
					t.Errorf("%d pushes at start with the Lease failing, want 1", r.Pushes())
				}
				r.src.set("v2")
				r.signal()
				advance(testInterval)
				if r.Pushes() != 2 || hub.summary(t).Spec.ContentHash != "v2" {
					t.Errorf("%d pushes after a change with the Lease failing, want 2 (v2 on the hub)", r.Pushes())
				}
				advance(10 * testHeartbeat)
				if r.Renewals() != 0 {
					t.Errorf("%d renewals counted although every one failed", r.Renewals())
				}
				// Backoff 1s, 2s, 4s … capped at the heartbeat, not at MaxBackoff's hour; a stalled
				// attempt takes its 30s timeout on top.
				if attempts, _ := hub.counts("Lease"); attempts < 10 {
					t.Errorf("%d renewal attempts in eleven heartbeats, want at least 10", attempts)
				}
				if n := r.logs.Count("renewing the agent's Lease on the hub failed"); n != 1 {
					t.Errorf("the renewal failure was logged %d times at V(0), want once (same error each time)", n)
				}
				hub.failing("Lease", nil)
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

// The Lease says who holds it, for how long (three heartbeats), and when it was renewed: now,
// advancing a heartbeat at each renewal. The agent's field manager applied it.
func TestLeaseFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newFakeHub(t)
		startedAt := time.Now()
		r := start(t, hub, defaultOptions())
		check := func(want time.Time) {
			t.Helper()
			l := hub.lease(t)
			if h := l.Spec.HolderIdentity; h == nil || *h != testCluster {
				t.Errorf("holderIdentity %v, want %s", h, testCluster)
			}
			if d := l.Spec.LeaseDurationSeconds; d == nil || *d != 180 {
				t.Errorf("leaseDurationSeconds %v, want 180 (3 × 1m)", d)
			}
			if rt := l.Spec.RenewTime; rt == nil || !rt.Time.Equal(want) {
				t.Errorf("renewTime %v, want %s", rt, want)
			}
			if l.Spec.AcquireTime != nil || l.Spec.LeaseTransitions != nil {
				t.Errorf("the agent set fields it has no use for: %+v", l.Spec)
			}
			// Applied whole once, then renewed by patching renewTime alone.
			for _, m := range l.ManagedFields {
				if m.Manager != FieldManager {
					t.Errorf("managed by %s, want only %s", m.Manager, FieldManager)
				}
			}
		}
		check(startedAt)
		advance(testHeartbeat)
		check(startedAt.Add(testHeartbeat))
		advance(testHeartbeat)
		check(startedAt.Add(2 * testHeartbeat))
		r.stop(t)
	})
}

// A Heartbeat shorter than Interval acts as Interval, for the Lease as for the summary's
// announced heartbeat, so the two never disagree.
func TestShortHeartbeatActsAsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newFakeHub(t)
		r := start(t, hub, Options{Cluster: testCluster, Interval: 10 * time.Second, Heartbeat: 2 * time.Second})
		advance(10*time.Second - time.Millisecond)
		if r.Renewals() != 1 {
			t.Errorf("%d renewals before the interval passed, want 1", r.Renewals())
		}
		advance(time.Millisecond)
		if r.Renewals() != 2 {
			t.Errorf("%d renewals once the interval passed, want 2", r.Renewals())
		}
		if d := hub.lease(t).Spec.LeaseDurationSeconds; d == nil || *d != 30 {
			t.Errorf("leaseDurationSeconds %v, want 30", d)
		}
		if hb := hub.summary(t).Spec.HeartbeatInterval; hb == nil || hb.Duration != 10*time.Second {
			t.Errorf("spec.heartbeatInterval %v, want 10s", hb)
		}
		r.stop(t)
	})
}

// RenewLease alone (as agent.Run starts it before the cluster is read) renews with no summary.
func TestRenewLeaseAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newFakeHub(t)
		p, err := New(hub, defaultOptions())
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
		if attempts, _ := hub.counts("PolicyReportSummary"); attempts != 0 {
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
	hub := fake.NewClientBuilder().WithScheme(scheme).Build()
	if _, err := New(hub, Options{Cluster: testCluster}); err == nil || !strings.Contains(err.Error(), "coordination.k8s.io/v1") {
		t.Errorf("New with a scheme without coordination.k8s.io/v1: error %v, want one naming it", err)
	}
}

// After a failed write the hub's summary is unknown (the write may have landed), so the next
// attempt writes even content whose hash equals the last successful push's.
func TestRetryAfterFailureIsForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newFakeHub(t)
		r := start(t, hub, defaultOptions())
		hub.failing("PolicyReportSummary", refused("policyreportsummaries"))
		r.src.set("v2")
		r.signal()
		advance(testInterval)
		if attempts, _ := hub.counts("PolicyReportSummary"); attempts != 2 {
			t.Fatalf("%d summary attempts, want 2 (start, then v2 refused)", attempts)
		}
		r.src.set("v1") // back to what the last successful push held
		hub.failing("PolicyReportSummary", nil)
		advance(testInterval)
		if r.Pushes() != 2 {
			t.Errorf("Pushes() %d: the retry of content equal to the last push was skipped, want it written", r.Pushes())
		}
		r.stop(t)
	})
}
