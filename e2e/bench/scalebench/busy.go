package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// busyPass is the count (pass or fail, -busy-moves) a summary of round k reports for every policy: the round is read
// back from the slices by it.
func busyPass(round int) int64 { return 1000 + int64(round) }

// busyFleet is a fleet whose results keep moving (pod churn): every cluster's agent pushes a
// summary with new results every -busy-every, spread evenly, for -busy. It measures the cores
// of every part, the hub apiserver's writes by resource, the bytes of FleetPolicy versions the
// hub wrote (each stored whole in etcd), and, per summary, the time from its write until every
// FleetPolicy's status shows that round's results for its cluster (or a later round's).
func (b *bench) busyFleet(ctx context.Context, r *result, h *hubProc) error {
	if b.o.busy <= 0 {
		return nil
	}
	names := r.clusterNames
	rounds := int(b.o.busy / b.o.busyEvery)
	if b.o.busyMoves != "pass" && b.o.busyMoves != "fail" {
		return fmt.Errorf("-busy-moves %q: pass or fail", b.o.busyMoves)
	}
	obs := newBusyObserver(r.prefix, len(r.fps), names, rounds, b.o.busyMoves)
	stop, err := observeEach(ctx, b.informer, &policyhubv1.FleetPolicy{}, obs.observe)
	if err != nil {
		return err
	}
	stopSlices, err := observeEach(ctx, b.informer, &policyhubv1.ClusterStatusSlice{}, obs.observe)
	if err != nil {
		stop()
		return err
	}
	defer stopSlices()
	defer stop()
	if b.o.busyPaced {
		return b.busyPacedFleet(ctx, r, h, obs, rounds)
	}
	// One agent's Pusher per cluster: each applies its summary whole at its first write, then
	// patches it, as the agent does.
	pushers := make([]*push.Pusher, len(names))
	for i, name := range names {
		// A heartbeat longer than the benchmark: no result turns stale.
		if pushers[i], err = push.New(b.hub, push.Options{Cluster: name, Heartbeat: time.Hour}); err != nil {
			return err
		}
	}
	logf("%s: busy fleet: %d clusters each pushing new results every %s for %s...", r.name, len(names), b.o.busyEvery, b.o.busy)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	obs.start()
	var mu sync.Mutex
	var summaryBytes int64
	done := pacedWrites(start, start.Add(b.o.busy), b.o.busyEvery, len(names), func(ci, k int) error {
		u, err := b.summary(r, ci)
		if err != nil {
			return err
		}
		setBusyRound(u, k, b.o.busyMoves)
		raw, _ := json.Marshal(u.Object)
		var spec policyhubv1.PolicyReportSummarySpec
		content, _ := u.Object["spec"].(map[string]any)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, &spec); err != nil {
			return err
		}
		err = pushers[ci].Write(ctx, spec, time.Now())
		obs.written(ci, k, time.Now())
		mu.Lock()
		summaryBytes += int64(len(raw))
		mu.Unlock()
		return err
	})
	took := time.Since(start)
	after := b.snapshot(h)
	writesAfter := b.hubWrites(ctx)
	// The last summaries still on their way into the statuses: wait for them, at most 2 minutes
	// (a write not shown by then counts as never).
	obs.waitLast(time.Now().Add(2 * time.Minute))
	q := &r.busy
	q.ran, q.took, q.failed, q.skipped, q.rounds = true, took, done.failed, done.skipped, rounds
	q.cores = coresBetween(before, after, took)
	q.hubWrites = writesBetween(writes, writesAfter)
	q.statusBytesPerMin, q.summaryBytesPerMin = float64(obs.statusBytes())/took.Minutes(), float64(summaryBytes)/took.Minutes()
	q.latencies, q.notReached = obs.latencies()
	logf("%s: busy fleet: %d rounds in %s (%d writes skipped: the cluster's last still in flight); hub apiserver %.2f cores, hub %.2f cores; summary → status p99 %.2fs (%d not reached); writes %s", r.name, rounds,
		took.Round(time.Second), done.skipped, q.cores[partHubAPIServer], q.cores[partHub], percentile(q.latencies, 99), q.notReached, writesLine(q.hubWrites))
	return nil
}

// busyPacedFleet is busyFleet with every cluster's agent scheduling its own pushes
// (-busy-paced): each round only changes the cluster's content and signals its Pusher, which
// pushes when the agent would (push.Pusher.PushSummary: at once when urgent — -busy-moves fail —
// while its reserve lasts, else at the share the hub publishes). What reaches the hub, and how
// late, is then the pacing's doing: the latencies count from each write, the rounds a push
// skipped (coalesced) are the pacing's deferral.
func (b *bench) busyPacedFleet(ctx context.Context, r *result, h *hubProc, obs *busyObserver, rounds int) error {
	names := r.clusterNames
	agentsCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	agents := make([]*pacedAgent, len(names))
	for i, name := range names {
		o := push.Options{Cluster: name, Heartbeat: time.Hour} // no result turns stale
		apiWrites, err := push.NewAPIWrites(b.hub, o)
		if err != nil {
			return err
		}
		a := &pacedAgent{ci: i, round: -1, changed: make(chan struct{}, 1), obs: obs}
		a.writes = stampedWrites{Writes: apiWrites, agent: a}
		if a.pusher, err = push.NewWith(a.writes, o); err != nil {
			return err
		}
		a.build = func() policyhubv1.PolicyReportSummarySpec { return a.spec(b, r) }
		agents[i] = a
	}
	logf("%s: busy fleet (paced): %d agents, each's results changing every %s for %s, pushed as the agent schedules...", r.name, len(names), b.o.busyEvery, b.o.busy)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	obs.start()
	var running sync.WaitGroup
	done := pacedWrites(start, start.Add(b.o.busy), b.o.busyEvery, len(names), func(ci, k int) error {
		a := agents[ci]
		a.mu.Lock()
		a.round = k
		a.mu.Unlock()
		if k == 0 { // the agent starts at its first round: its start push spread like the rounds
			running.Go(func() { _ = a.pusher.PushSummary(agentsCtx, a.changed, a.build) })
			return nil
		}
		select {
		case a.changed <- struct{}{}:
		default:
		}
		return nil
	})
	took := time.Since(start)
	stopAgents()
	running.Wait()
	after := b.snapshot(h)
	writesAfter := b.hubWrites(ctx)
	obs.waitLast(time.Now().Add(2 * time.Minute))
	var pushes, summaryBytes int64
	for _, a := range agents {
		pushes += a.pusher.Pushes()
		summaryBytes += a.bytes.Load()
	}
	pushInterval, _ := agents[0].pusher.Pace()
	q := &r.busy
	q.ran, q.took, q.failed, q.skipped, q.rounds = true, took, done.failed, done.skipped, rounds
	q.cores = coresBetween(before, after, took)
	q.hubWrites = writesBetween(writes, writesAfter)
	q.statusBytesPerMin, q.summaryBytesPerMin = float64(obs.statusBytes())/took.Minutes(), float64(summaryBytes)/took.Minutes()
	q.latencies, q.notReached = obs.latencies()
	logf("%s: busy fleet (paced): %d rounds in %s, %d pushes (%.1f/s; cluster 0 keeps a share of %s); hub apiserver %.2f cores, hub %.2f cores; summary → status p99 %.2fs (%d not reached); writes %s", r.name, rounds,
		took.Round(time.Second), pushes, float64(pushes)/took.Seconds(), pushInterval, q.cores[partHubAPIServer], q.cores[partHub], percentile(q.latencies, 99), q.notReached, writesLine(q.hubWrites))
	return nil
}

// pacedAgent is one virtual cluster's agent in the paced busy fleet: its latest round, and the
// Pusher that schedules its pushes.
type pacedAgent struct {
	ci      int
	pusher  *push.Pusher
	writes  push.Writes
	changed chan struct{}
	build   func() policyhubv1.PolicyReportSummarySpec
	obs     *busyObserver
	bytes   atomic.Int64

	// last is the last good build (PushSummary's goroutine only).
	last policyhubv1.PolicyReportSummarySpec

	mu    sync.Mutex
	round int
}

// spec is the cluster's summary of its latest round, its hash naming the round.
func (a *pacedAgent) spec(b *bench, r *result) policyhubv1.PolicyReportSummarySpec {
	a.mu.Lock()
	k := a.round
	a.mu.Unlock()
	u, err := b.summary(r, a.ci)
	if err != nil {
		logf("cluster %d: build round %d: %v (its last build stands)", a.ci, k, err)
		return a.last
	}
	setBusyRound(u, max(k, 0), b.o.busyMoves)
	var spec policyhubv1.PolicyReportSummarySpec
	content, _ := u.Object["spec"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, &spec); err != nil {
		logf("cluster %d: build round %d: %v (its last build stands)", a.ci, k, err)
		return a.last
	}
	a.last = spec
	return spec
}

// stampedWrites are an agent's writes through the hub's API, each summary that lands stamped
// for the observer with the round its hash names.
type stampedWrites struct {
	push.Writes
	agent *pacedAgent
}

func (w stampedWrites) Summary(ctx context.Context, spec policyhubv1.PolicyReportSummarySpec, at time.Time) (push.PacingRead, error) {
	read, err := w.Writes.Summary(ctx, spec, at)
	if err != nil {
		return read, err
	}
	if i := strings.LastIndex(spec.ContentHash, "-round-"); i >= 0 {
		if k, convErr := strconv.Atoi(spec.ContentHash[i+len("-round-"):]); convErr == nil && k >= 0 && k < len(w.agent.obs.writtenAt[w.agent.ci]) {
			w.agent.obs.written(w.agent.ci, k, time.Now())
		}
	}
	if raw, err := json.Marshal(spec); err == nil {
		w.agent.bytes.Add(int64(len(raw)))
	}
	return read, nil
}

// setBusyRound makes a summary report round k: every policy's count of result moved (pass or
// fail) is busyPass(k), so its content (and hash) changes every round.
func setBusyRound(u *unstructured.Unstructured, k int, moved string) {
	policies, _, _ := unstructured.NestedSlice(u.Object, "spec", "policies")
	var total int64
	for _, p := range policies {
		if m, ok := p.(map[string]any); ok {
			_ = unstructured.SetNestedField(m, busyPass(k), "results", moved)
			total += busyPass(k)
		}
	}
	_ = unstructured.SetNestedSlice(u.Object, policies, "spec", "policies")
	_ = unstructured.SetNestedField(u.Object, total, "spec", "totals", moved)
	hash, _, _ := unstructured.NestedString(u.Object, "spec", "contentHash")
	_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%s-round-%d", hash, k), "spec", "contentHash")
}

// busyObserver stamps, per cluster and round, when every FleetPolicy's status first showed that
// round's results (or a later round's) for the cluster.
type busyObserver struct {
	prefix string
	fps    int
	index  map[string]int
	// count is the count a round moves.
	count func(*policyhubv1.ResultCounts) int64

	mu        sync.Mutex
	started   bool
	writtenAt [][]time.Time     // [cluster][round]
	reached   [][]time.Time     // [cluster][round]
	seen      []map[string]int  // [cluster] FleetPolicy → the latest round its status shows
	versions  map[string]string // FleetPolicy → resourceVersion last counted
	bytes     int64
}

func newBusyObserver(prefix string, fps int, clusters []string, rounds int, moved string) *busyObserver {
	o := &busyObserver{prefix: prefix, fps: fps, index: map[string]int{}, versions: map[string]string{}, count: func(r *policyhubv1.ResultCounts) int64 { return r.Fail }}
	if moved == "pass" {
		o.count = func(r *policyhubv1.ResultCounts) int64 { return r.Pass }
	}
	for i, c := range clusters {
		o.index[c] = i
		o.writtenAt = append(o.writtenAt, make([]time.Time, rounds))
		o.reached = append(o.reached, make([]time.Time, rounds))
		o.seen = append(o.seen, map[string]int{})
	}
	return o
}

func (o *busyObserver) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = true
}

func (o *busyObserver) written(ci, k int, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writtenAt[ci][k] = at
}

func (o *busyObserver) observe(obj any) {
	now := time.Now()
	written, ok := obj.(client.Object)
	if !ok {
		return
	}
	var name string
	var clusters []policyhubv1.ClusterStatus
	switch x := obj.(type) {
	case *policyhubv1.FleetPolicy:
		name = x.Name
	case *policyhubv1.ClusterStatusSlice:
		if x.Declaration.Kind != policyhubv1.KindFleetPolicy {
			return
		}
		name, clusters = x.Declaration.Name, x.Clusters
	}
	if !strings.HasPrefix(name, o.prefix) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.started {
		return
	}
	// Bytes written: each new version of a FleetPolicy or of one of its slices.
	key := fmt.Sprintf("%T/%s/%s", obj, written.GetNamespace(), written.GetName())
	if o.versions[key] != written.GetResourceVersion() {
		o.versions[key] = written.GetResourceVersion()
		if raw, err := json.Marshal(obj); err == nil {
			o.bytes += int64(len(raw))
		}
	}
	fp := struct{ Name string }{name}
	for _, c := range clusters {
		ci, ok := o.index[c.Name]
		if !ok || c.Results == nil || o.count(c.Results) < busyPass(0) {
			continue
		}
		round := int(o.count(c.Results) - busyPass(0))
		if round >= len(o.reached[ci]) || round <= o.seen[ci][fp.Name]-1 {
			continue
		}
		o.seen[ci][fp.Name] = round + 1 // stored +1: 0 is "none yet"
		if len(o.seen[ci]) < o.fps {
			continue
		}
		least := round
		for _, r := range o.seen[ci] {
			least = min(least, r-1)
		}
		for k := 0; k <= least; k++ {
			if o.reached[ci][k].IsZero() {
				o.reached[ci][k] = now
			}
		}
	}
}

// waitLast waits until every cluster's last written summary reached every status, or deadline.
func (o *busyObserver) waitLast(deadline time.Time) {
	for time.Now().Before(deadline) {
		o.mu.Lock()
		done := true
		for ci := range o.reached {
			last := -1
			for k, w := range o.writtenAt[ci] {
				if !w.IsZero() {
					last = k
				}
			}
			if last >= 0 && o.reached[ci][last].IsZero() {
				done = false
				break
			}
		}
		o.mu.Unlock()
		if done {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// latencies are the sorted seconds from each summary's write until every status showed it;
// notReached counts the summaries that never were.
func (o *busyObserver) latencies() (sorted []float64, notReached int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for ci := range o.writtenAt {
		for k, w := range o.writtenAt[ci] {
			if w.IsZero() {
				continue
			}
			if at := o.reached[ci][k]; !at.IsZero() {
				sorted = append(sorted, max(at.Sub(w).Seconds(), 0))
			} else {
				notReached++
			}
		}
	}
	slices.Sort(sorted)
	return sorted, notReached
}

func (o *busyObserver) statusBytes() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bytes
}
