package main

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// busyPacedFleet is busyFleet with every cluster's agent scheduling its own pushes
// (-busy-paced): each round only changes the cluster's content and signals its Pusher, which
// pushes when the agent would (push.Pusher.PushSummary: at once when urgent — a fail count
// moved — while its reserve lasts, else at the share the hub publishes). What reaches the hub,
// and how late, is then the pacing's doing.
//
// The agents start first and push their round 0 (every agent's forced push at start, a fleet
// restarting at once), and the window is measured from when every status shows it and the hub
// has settled: the steady state, not the restart. After the rounds the agents keep running for
// one published push interval and a margin, and the summaries on the hub are checked to hold
// each cluster's last round: deferred pass-only changes must land, not be lost.
func (b *bench) busyPacedFleet(ctx context.Context, r *result, h *hubProc, obs *busyObserver, plan busyPlan, rounds int) error {
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
		a := &pacedAgent{ci: i, changed: make(chan struct{}, 1), obs: obs, plan: plan}
		a.writes = stampedWrites{Writes: apiWrites, agent: a}
		if a.pusher, err = push.NewWith(a.writes, o); err != nil {
			return err
		}
		a.build = func() policyhubv1.PolicyReportSummarySpec { return a.spec(b, r) }
		agents[i] = a
	}
	q := &r.busy
	q.paced = true
	var running sync.WaitGroup
	defer running.Wait()
	defer stopAgents()

	// Round 0: the agents start, spread over one round as the rounds are.
	logf("%s: busy fleet (paced): starting %d agents (their round 0, pushed at start), spread over %s...", r.name, len(names), b.o.busyEvery)
	obs.start()
	startedAt := time.Now()
	pacedWrites(startedAt, startedAt.Add(b.o.busyEvery), b.o.busyEvery, len(names), func(ci, _ int) error {
		a := agents[ci]
		running.Go(func() { _ = a.pusher.PushSummary(agentsCtx, a.changed, a.build) })
		return nil
	})
	// Every agent's first push landed, and (fail counts are shown in the slices, pass counts
	// not) every status shows it.
	startDone := func() int {
		waiting := 0
		for _, a := range agents {
			if a.pusher.Pushes() == 0 {
				waiting++
			}
		}
		if plan.moved == "fail" {
			waiting = max(waiting, obs.reachedAll(0))
		}
		return waiting
	}
	deadline := time.Now().Add(b.o.timeout)
	for startDone() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	if waiting := startDone(); waiting > 0 {
		logf("%s: busy fleet (paced): %d clusters' round 0 not pushed or not in every status within %s; measuring anyway", r.name, waiting, b.o.timeout)
	}
	q.startTook = time.Since(startedAt)
	if _, _, ok, _ := b.settle(h, 2*time.Minute); !ok {
		logf("%s: the hub did not settle within 2m after the agents' start; measuring anyway", r.name)
	}
	var pushesAtStart int64
	for _, a := range agents {
		pushesAtStart += a.pusher.Pushes()
	}
	q.pushInterval, q.heartbeat = agents[0].pusher.Pace()
	logf("%s: busy fleet (paced): every status shows round 0 %s after the start (%d pushes); cluster 0's pace %s/%s; rounds of %s for %s, fail share %.2f...", r.name,
		q.startTook.Round(time.Second), pushesAtStart, q.pushInterval, q.heartbeat, b.o.busyEvery, b.o.busy, b.o.busyFailShare)

	obs.resetBytes()
	bytesAtStart := sumBytes(agents)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	done := pacedWrites(start, start.Add(b.o.busy), b.o.busyEvery, len(names), func(ci, k int) error {
		a, round := agents[ci], k+1
		a.mu.Lock()
		a.round = round
		a.mu.Unlock()
		if plan.counted(ci, round) {
			obs.changed(ci, round, time.Now())
		}
		select {
		case a.changed <- struct{}{}:
		default:
		}
		return nil
	})
	took := time.Since(start)
	after := b.snapshot(h)
	writesAfter := b.hubWrites(ctx)
	var pushes int64
	for _, a := range agents {
		pushes += a.pusher.Pushes()
	}
	pushes -= pushesAtStart
	summaryBytes := sumBytes(agents) - bytesAtStart

	// Deferred, not lost: the agents keep running one push interval and a margin, and every
	// cluster's summary on the hub must then hold its last round.
	pushInterval, _ := agents[0].pusher.Pace()
	drainStart := time.Now()
	q.lastLanded, q.lastMissing = b.lastRoundsLanded(ctx, r, agents, drainStart.Add(pushInterval+30*time.Second))
	q.drainTook = time.Since(drainStart)
	stopAgents()
	running.Wait()
	obs.waitLast(time.Now().Add(2 * time.Minute))

	q.ran, q.took, q.failed, q.skipped, q.rounds = true, took, done.failed, done.skipped, rounds
	q.pushes = pushes
	q.cores = coresBetween(before, after, took)
	q.hubWrites = writesBetween(writes, writesAfter)
	q.statusBytesPerMin, q.summaryBytesPerMin = float64(obs.statusBytes())/took.Minutes(), float64(summaryBytes)/took.Minutes()
	q.latencies, q.notReached = obs.latencies()
	q.changeLatencies, q.changeNotReached = obs.changeLatencies()
	logf("%s: busy fleet (paced): %d rounds in %s, %d pushes (%.1f/s); hub apiserver %.2f cores, hub %.2f cores; fail change → every status p50 %.2fs p99 %.2fs (%d, %d never); last round on the hub for %d clusters, not for %d, %s after the rounds; writes %s", r.name, rounds,
		took.Round(time.Second), pushes, float64(pushes)/took.Seconds(), q.cores[partHubAPIServer], q.cores[partHub], percentile(q.changeLatencies, 50), percentile(q.changeLatencies, 99),
		len(q.changeLatencies), q.changeNotReached, q.lastLanded, q.lastMissing, q.drainTook.Round(time.Second), writesLine(q.hubWrites))
	return nil
}

func sumBytes(agents []*pacedAgent) (n int64) {
	for _, a := range agents {
		n += a.bytes.Load()
	}
	return n
}

// lastRoundsLanded polls the summaries on the hub until every cluster's holds the agent's last
// round (by its content hash), or deadline: how many do and do not.
func (b *bench) lastRoundsLanded(ctx context.Context, r *result, agents []*pacedAgent, deadline time.Time) (landed, missing int) {
	index := make(map[string]int, len(r.clusterNames))
	for i, n := range r.clusterNames {
		index[n] = i
	}
	for {
		var list policyhubv1.PolicyReportSummaryList
		err := b.hub.List(ctx, &list)
		if err != nil {
			logf("%s: list the summaries: %v", r.name, err)
		} else {
			landed = 0
			for _, s := range list.Items {
				ci, ok := index[s.Namespace]
				if !ok || s.Name != policyhubv1.SummaryName {
					continue
				}
				a := agents[ci]
				a.mu.Lock()
				last := a.round
				a.mu.Unlock()
				if roundOf(s.Spec.ContentHash) == last {
					landed++
				}
			}
			missing = len(agents) - landed
			if missing == 0 {
				return landed, 0
			}
		}
		if !time.Now().Before(deadline) {
			return landed, missing
		}
		time.Sleep(5 * time.Second)
	}
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
	plan    busyPlan
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
	setBusyRound(u, a.plan, a.ci, k)
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
	w.agent.obs.written(w.agent.ci, roundOf(spec.ContentHash), time.Now())
	if raw, err := json.Marshal(spec); err == nil {
		w.agent.bytes.Add(int64(len(raw)))
	}
	return read, nil
}
