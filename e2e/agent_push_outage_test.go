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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// summarySource stands for the agent's collect+summarize stages: the content the pusher builds
// from, changed by the test, and how often the pusher built it.
type summarySource struct {
	mu     sync.Mutex
	spec   policyhubv1.PolicyReportSummarySpec
	builds atomic.Int64
}

// set makes the content: hash names it, pass is a total that changes with it.
func (s *summarySource) set(hash string, pass int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec = policyhubv1.PolicyReportSummarySpec{ContentHash: hash, Totals: policyhubv1.ResultCounts{Pass: pass, Fail: 1}}
}

func (s *summarySource) build() policyhubv1.PolicyReportSummarySpec {
	s.builds.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.spec.DeepCopy()
}

// runningPusher is a push.Pusher running in the background of a test.
type runningPusher struct {
	*push.Pusher
	src     *summarySource
	changed chan struct{}
	done    chan error
	cancel  context.CancelFunc
}

// startPusher runs a Pusher writing through hub until stop or the end of the test.
func startPusher(t *testing.T, hub client.Client, o push.Options, src *summarySource) *runningPusher {
	t.Helper()
	p, err := push.New(hub, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningPusher{Pusher: p, src: src, changed: make(chan struct{}, 1), done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- p.Run(ctx, r.changed, src.build) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// signal tells the pusher the content may have changed (coalesced like the agent's collector).
func (r *runningPusher) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// running fails the test if Run has returned.
func (r *runningPusher) running(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		t.Fatalf("Run returned while its context was live: %v", err)
	default:
	}
}

// stop ends Run and returns what it returned; an error if it did not return in time.
func (r *runningPusher) stop() error {
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		return errors.New("Run did not return within 10s of its context's end")
	}
}

// waitBuilds waits until the pusher has built the content n more times than before.
func (r *runningPusher) waitBuilds(t *testing.T, before, n int64, what string) {
	t.Helper()
	eventually(t, 30*time.Second, 20*time.Millisecond, what, func() error {
		if got := r.src.builds.Load(); got < before+n {
			return fmt.Errorf("%d builds since, want %d", got-before, n)
		}
		return nil
	})
}

// waitPushes waits until Pushes() reaches n (a write shows on the hub just before it is counted)
// and fails if it went beyond.
func (r *runningPusher) waitPushes(t *testing.T, n int64, what string) {
	t.Helper()
	eventually(t, 10*time.Second, 20*time.Millisecond, what, func() error {
		if got := r.Pushes(); got < n {
			return fmt.Errorf("Pushes() = %d, want %d", got, n)
		}
		return nil
	})
	if got := r.Pushes(); got != n {
		t.Errorf("%s: Pushes() = %d, want %d", what, got, n)
	}
}

// hubSummary gets the cluster's summary from the hub.
func hubSummary(ctx context.Context, hub client.Client, cluster string) (*policyhubv1.PolicyReportSummary, error) {
	s := &policyhubv1.PolicyReportSummary{}
	err := hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: push.SummaryName}, s)
	return s, err
}

// waitSummary waits until the hub's summary carries content hash and the matching pass total.
func waitSummary(ctx context.Context, t *testing.T, hub client.Client, cluster, hash string, pass int64, timeout time.Duration) *policyhubv1.PolicyReportSummary {
	t.Helper()
	var got *policyhubv1.PolicyReportSummary
	eventually(t, timeout, 50*time.Millisecond, "the summary on the hub holds "+hash, func() error {
		s, err := hubSummary(ctx, hub, cluster)
		if err != nil {
			return err
		}
		if s.Spec.ContentHash != hash || s.Spec.Totals.Pass != pass {
			return fmt.Errorf("contentHash %q pass %d, want %q pass %d", s.Spec.ContentHash, s.Spec.Totals.Pass, hash, pass)
		}
		got = s
		return nil
	})
	return got
}

// checkStamps checks what Run sets on every summary.
func checkStamps(t *testing.T, s *policyhubv1.PolicyReportSummary, cluster string, heartbeat time.Duration) {
	t.Helper()
	if s.Spec.Cluster != cluster {
		t.Errorf("spec.cluster %q, want %q", s.Spec.Cluster, cluster)
	}
	if s.Spec.GeneratedAt == nil || time.Since(s.Spec.GeneratedAt.Time) > 5*time.Minute || time.Until(s.Spec.GeneratedAt.Time) > time.Minute {
		t.Errorf("spec.generatedAt %v, want about now", s.Spec.GeneratedAt)
	}
	if s.Spec.HeartbeatInterval == nil || s.Spec.HeartbeatInterval.Duration != heartbeat {
		t.Errorf("spec.heartbeatInterval %v, want %s", s.Spec.HeartbeatInterval, heartbeat)
	}
	// The spec is atomic: whoever wrote it last owns it whole — the agent's first apply, then its
	// patches (an Update). Nobody else may own any of it.
	specOwners := map[string]bool{}
	for _, m := range s.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), `"f:spec"`) {
			specOwners[m.Manager+" "+string(m.Operation)] = true
		}
	}
	if len(specOwners) == 0 {
		t.Errorf("managed fields: nobody owns spec")
	}
	for owner := range specOwners {
		if !strings.HasPrefix(owner, push.FieldManager+" ") {
			t.Errorf("spec owned by %s as well as %s (owners %v)", owner, push.FieldManager, specOwners)
		}
	}
}

// The pusher writes the summary at start; a change signal with the same content writes nothing;
// a changed content is written once, and a change right after a push (within the interval) is
// written when the interval has passed — nothing lost. A watch on the hub sees exactly these writes.
func TestAgentPushOnlyWhenChanged(t *testing.T) {
	ctx := testContext(t)
	const cluster = "push-test-1"
	const heartbeat = time.Hour
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, cluster)
	watcher, err := client.NewWithWatch(fleetOf(t).Hub.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}

	src := &summarySource{}
	src.set("v1", 10)
	p := startPusher(t, hub, push.Options{Cluster: cluster, Interval: 200 * time.Millisecond, Heartbeat: heartbeat}, src)
	first := waitSummary(ctx, t, hub, cluster, "v1", 10, 30*time.Second)
	checkStamps(t, first, cluster, heartbeat)
	p.waitPushes(t, 1, "the first push counted")

	// Every write from here on shows in this watch.
	w, err := watcher.Watch(ctx, &policyhubv1.PolicyReportSummaryList{}, &client.ListOptions{
		Namespace: cluster,
		Raw:       &metav1.ListOptions{ResourceVersion: first.ResourceVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Same content, signalled: the pusher looks (builds) and writes nothing.
	builds := src.builds.Load()
	p.signal()
	p.waitBuilds(t, builds, 1, "the pusher looked at the unchanged content")
	if got := p.Pushes(); got != 1 {
		t.Errorf("Pushes() = %d after an unchanged signal, want 1", got)
	}
	if s, err := hubSummary(ctx, hub, cluster); err != nil {
		t.Fatal(err)
	} else if s.ResourceVersion != first.ResourceVersion {
		t.Errorf("resourceVersion %s → %s after an unchanged signal: something was written", first.ResourceVersion, s.ResourceVersion)
	}

	// Changed content: written once.
	src.set("v2", 20)
	p.signal()
	second := waitSummary(ctx, t, hub, cluster, "v2", 20, 30*time.Second)
	if second.ResourceVersion == first.ResourceVersion {
		t.Errorf("resourceVersion unchanged (%s) although the content changed", second.ResourceVersion)
	}
	checkStamps(t, second, cluster, heartbeat)

	// Changed again right away, within the interval: written once the interval has passed.
	src.set("v3", 30)
	p.signal()
	waitSummary(ctx, t, hub, cluster, "v3", 30, 30*time.Second)
	p.running(t)
	if err := p.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if got := p.Pushes(); got != 3 {
		t.Errorf("Pushes() = %d, want 3 (start, v2, v3)", got)
	}

	// The hub saw exactly the two changes, in order: the unchanged signal wrote nothing. Only
	// spec writes move metadata.generation (status writes, e.g. a hub's, do not).
	var seen []string
	generation := first.Generation
	deadline := time.After(30 * time.Second)
	for len(seen) == 0 || seen[len(seen)-1] != "v3" {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended early; writes seen %v", seen)
			}
			s, isSummary := ev.Object.(*policyhubv1.PolicyReportSummary)
			if !isSummary || ev.Type != watch.Modified {
				t.Fatalf("unexpected watch event %s %T (writes seen %v)", ev.Type, ev.Object, seen)
			}
			if s.Generation != generation {
				generation = s.Generation
				seen = append(seen, s.Spec.ContentHash)
			}
		case <-deadline:
			t.Fatalf("the watch did not show the write of v3; writes seen %v", seen)
		}
	}
	if fmt.Sprint(seen) != "[v2 v3]" {
		t.Errorf("writes on the hub after the first: %v, want [v2 v3]", seen)
	}
}

// The hub's apiserver goes down; the content changes twice meanwhile and the pusher's attempts
// fail. Run keeps going, and once the hub is back, the summary on it holds the LATEST content.
func TestAgentPushSurvivesHubOutage(t *testing.T) {
	inParallel(t)
	// A fleet of the hub and one managed cluster (the fleet needs at least one) for this test
	// alone, so stopping its hub disturbs no other test.
	own := fleet.StartForTest(t, fleet.Options{Managed: []fleet.ManagedCluster{{Name: "cluster-1"}}})
	ctx := testContext(t)
	const cluster = "push-outage"
	const heartbeat = time.Hour
	hub := directClient(t, own.Hub.Config)
	createNamespace(ctx, t, hub, cluster)

	src := &summarySource{}
	src.set("before", 1)
	p := startPusher(t, hub, push.Options{Cluster: cluster, Interval: 200 * time.Millisecond, Heartbeat: heartbeat, MaxBackoff: 500 * time.Millisecond}, src)
	before := waitSummary(ctx, t, hub, cluster, "before", 1, 30*time.Second)

	if err := own.Hub.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = own.Hub.StartAPIServer(context.Background())
		}
	})

	// First change: tried (built), failed, and tried again with a rebuild.
	builds := src.builds.Load()
	src.set("during-1", 2)
	p.signal()
	p.waitBuilds(t, builds, 2, "the pusher retried the first change while the hub was down")
	// Second change, the latest: the next retry builds it.
	builds = src.builds.Load()
	src.set("during-2", 3)
	p.signal()
	p.waitBuilds(t, builds, 2, "the pusher retried the second change while the hub was down")
	if got := p.Pushes(); got != 1 {
		t.Errorf("Pushes() = %d while the hub was down, want 1 (only the one before)", got)
	}
	p.running(t)

	if err := own.Hub.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	after := waitSummary(ctx, t, hub, cluster, "during-2", 3, 60*time.Second)
	checkStamps(t, after, cluster, heartbeat)
	if after.ResourceVersion == before.ResourceVersion {
		t.Errorf("resourceVersion unchanged (%s) across the outage", after.ResourceVersion)
	}
	if after.UID != before.UID {
		t.Errorf("the summary was re-created (uid %s → %s), want the same object updated", before.UID, after.UID)
	}
	p.running(t)
	p.waitPushes(t, 2, "one push before the outage and one, of the latest content, after")
	if err := p.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}
