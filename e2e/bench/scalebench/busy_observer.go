package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// busyObserver stamps, per cluster and round, when the round changed the cluster's content, when
// a summary of it landed on the hub, and when every FleetPolicy's status first showed that
// round's results (or a later round's) for the cluster.
type busyObserver struct {
	prefix string
	fps    int
	index  map[string]int
	plan   busyPlan
	// from is the first round measured (the paced fleet's round 0 is its agents' start).
	from int
	// count is the count a round moves.
	count func(*policyhubv1.ResultCounts) int64

	mu        sync.Mutex
	started   bool
	changedAt [][]time.Time     // [cluster][round], rounds plan.counted only
	writtenAt [][]time.Time     // [cluster][round]
	reached   [][]time.Time     // [cluster][round]
	seen      []map[string]int  // [cluster] FleetPolicy → the latest round its status shows
	versions  map[string]string // FleetPolicy → resourceVersion last counted
	bytes     int64
}

func newBusyObserver(prefix string, fps int, clusters []string, rounds, from int, plan busyPlan) *busyObserver {
	o := &busyObserver{prefix: prefix, fps: fps, index: map[string]int{}, versions: map[string]string{}, plan: plan, from: from,
		count: func(r *policyhubv1.ResultCounts) int64 { return r.Fail }}
	if plan.moved == "pass" {
		o.count = func(r *policyhubv1.ResultCounts) int64 { return r.Pass }
	}
	for i, c := range clusters {
		o.index[c] = i
		o.changedAt = append(o.changedAt, make([]time.Time, rounds))
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

// resetBytes starts counting the bytes of status versions again (the measured window starts).
func (o *busyObserver) resetBytes() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bytes = 0
}

func (o *busyObserver) written(ci, k int, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k >= 0 && k < len(o.writtenAt[ci]) {
		o.writtenAt[ci][k] = at
	}
}

// changed stamps the moment round k changed cluster ci's watched count.
func (o *busyObserver) changed(ci, k int, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k >= 0 && k < len(o.changedAt[ci]) {
		o.changedAt[ci][k] = at
	}
}

// reachedAll says whether every cluster's round k is shown in every status.
func (o *busyObserver) reachedAll(k int) (missing int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for ci := range o.reached {
		if o.reached[ci][k].IsZero() {
			missing++
		}
	}
	return missing
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
	for _, c := range clusters {
		ci, ok := o.index[c.Name]
		if !ok || c.Results == nil || o.count(c.Results) < busyPass(0) {
			continue
		}
		round := int(o.count(c.Results) - busyPass(0))
		if round >= len(o.reached[ci]) || round <= o.seen[ci][name]-1 {
			continue
		}
		o.seen[ci][name] = round + 1 // stored +1: 0 is "none yet"
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

// lastCounted is cluster ci's last round that changed its watched count and was changed or
// written, or −1 (o.mu held).
func (o *busyObserver) lastCounted(ci int) int {
	last := -1
	for k := o.from; k < len(o.writtenAt[ci]); k++ {
		if o.plan.counted(ci, k) && (!o.writtenAt[ci][k].IsZero() || !o.changedAt[ci][k].IsZero()) {
			last = k
		}
	}
	return last
}

// waitLast waits until every cluster's last change of the watched count reached every status,
// or deadline.
func (o *busyObserver) waitLast(deadline time.Time) {
	for time.Now().Before(deadline) {
		o.mu.Lock()
		done := true
		for ci := range o.reached {
			if last := o.lastCounted(ci); last >= 0 && o.reached[ci][last].IsZero() {
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

// latencies are the sorted seconds from each written summary that changed the watched count
// until every status showed it; notReached counts those that never were.
func (o *busyObserver) latencies() (sorted []float64, notReached int) {
	return o.since(o.writtenAt)
}

// changeLatencies are the sorted seconds from each round that changed a cluster's watched count
// (not its write: the agent may hold it) until every status showed it; notReached counts the
// changes that never were.
func (o *busyObserver) changeLatencies() (sorted []float64, notReached int) {
	return o.since(o.changedAt)
}

func (o *busyObserver) since(stamps [][]time.Time) (sorted []float64, notReached int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for ci := range stamps {
		for k := o.from; k < len(stamps[ci]); k++ {
			w := stamps[ci][k]
			if w.IsZero() || !o.plan.counted(ci, k) {
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
