package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// busyPass is the count (pass or fail, -busy-moves) a summary of round k reports for every policy: the round is read
// back from the slices by it.
func busyPass(round int) int64 { return 1000 + int64(round) }

// busyFleet is a fleet whose results keep moving (pod churn): every cluster's agent pushes a
// summary with new results every -busy-every, spread evenly, for -busy. It measures the cores
// of every part, the hub apiserver's writes by resource, the bytes of FleetPolicy versions the
// hub wrote (each stored whole in etcd), and, per change of the watched count (busyPlan.counted),
// the time from the round that made it, and from its write, until every FleetPolicy's status
// shows that round's results for its cluster (or a later round's).
func (b *bench) busyFleet(ctx context.Context, r *result, h *hubProc) error {
	if b.o.busy <= 0 {
		return nil
	}
	names := r.clusterNames
	rounds := int(b.o.busy / b.o.busyEvery)
	plan, err := newBusyPlan(b.o.busyMoves, b.o.busyFailShare, len(names))
	if err != nil {
		return err
	}
	// The paced fleet's round 0 is the agents' start, before the measured window.
	slots, from := rounds, 0
	if b.o.busyPaced {
		slots, from = rounds+1, 1
	}
	obs := newBusyObserver(r.prefix, len(r.fps), names, slots, from, plan)
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
	r.busy.failShare = b.o.busyFailShare
	if b.o.busyPaced {
		return b.busyPacedFleet(ctx, r, h, obs, plan, rounds)
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
	logf("%s: busy fleet: %d clusters each pushing new results every %s for %s (fail share %.2f)...", r.name, len(names), b.o.busyEvery, b.o.busy, b.o.busyFailShare)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	obs.start()
	var mu sync.Mutex
	var summaryBytes int64
	done := pacedWrites(start, start.Add(b.o.busy), b.o.busyEvery, len(names), func(ci, k int) error {
		if plan.counted(ci, k) {
			obs.changed(ci, k, time.Now())
		}
		u, err := b.summary(r, ci)
		if err != nil {
			return err
		}
		setBusyRound(u, plan, ci, k)
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
	q.changeLatencies, q.changeNotReached = obs.changeLatencies()
	logf("%s: busy fleet: %d rounds in %s (%d writes skipped: the cluster's last still in flight); hub apiserver %.2f cores, hub %.2f cores; summary → status p99 %.2fs (%d not reached); change → status p99 %.2fs (%d not reached); writes %s", r.name, rounds,
		took.Round(time.Second), done.skipped, q.cores[partHubAPIServer], q.cores[partHub], percentile(q.latencies, 99), q.notReached, percentile(q.changeLatencies, 99), q.changeNotReached, writesLine(q.hubWrites))
	return nil
}

// setBusyRound makes a summary report round k of cluster ci as plan says: the counts plan moves
// take the value of the round that last moved them (busyPass), in every policy and the totals,
// and the content hash names the round, so its content changes every round.
func setBusyRound(u *unstructured.Unstructured, plan busyPlan, ci, k int) {
	fail, pass := plan.counts(ci, k)
	policies, _, _ := unstructured.NestedSlice(u.Object, "spec", "policies")
	var fails, passes int64
	for _, p := range policies {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if fail >= 0 {
			_ = unstructured.SetNestedField(m, busyPass(fail), "results", "fail")
			fails += busyPass(fail)
		}
		if pass >= 0 {
			_ = unstructured.SetNestedField(m, busyPass(pass), "results", "pass")
			passes += busyPass(pass)
		}
	}
	_ = unstructured.SetNestedSlice(u.Object, policies, "spec", "policies")
	if fail >= 0 {
		_ = unstructured.SetNestedField(u.Object, fails, "spec", "totals", "fail")
	}
	if pass >= 0 {
		_ = unstructured.SetNestedField(u.Object, passes, "spec", "totals", "pass")
	}
	hash, _, _ := unstructured.NestedString(u.Object, "spec", "contentHash")
	_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%s-round-%d", hash, k), "spec", "contentHash")
}

// roundOf is the busy round a summary's content hash names (setBusyRound), or −1.
func roundOf(contentHash string) int {
	i := strings.LastIndex(contentHash, "-round-")
	if i < 0 {
		return -1
	}
	k, err := strconv.Atoi(contentHash[i+len("-round-"):])
	if err != nil || k < 0 {
		return -1
	}
	return k
}
