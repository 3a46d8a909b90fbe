package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// tracker watches the FleetPolicies of one scenario (names with its prefix) through an informer
// and stamps, per FleetPolicy and cluster, the first time the status showed the cluster Synced,
// Failed, and with the expected report results. Stamps are taken when the event arrives, so
// waiting on them by polling adds nothing to the measured times.
type tracker struct {
	prefix string

	mu      sync.Mutex
	synced  map[string]map[string]time.Time
	failed  map[string]map[string]time.Time
	results map[string]map[string]time.Time
	// expect says which results a cluster's entry must show to count (set before the summaries are written).
	expect func(fp, cluster string) (policyhubv1.ResultCounts, bool)
	latest map[string]*policyhubv1.FleetPolicy
	// slices are the latest of the FleetPolicies' ClusterStatusSlices, by namespace/name.
	slices map[string]*policyhubv1.ClusterStatusSlice
}

func newTracker(ctx context.Context, informers cache.Informers, prefix string) (*tracker, func(), error) {
	t := &tracker{prefix: prefix, synced: map[string]map[string]time.Time{}, failed: map[string]map[string]time.Time{},
		results: map[string]map[string]time.Time{}, latest: map[string]*policyhubv1.FleetPolicy{}, slices: map[string]*policyhubv1.ClusterStatusSlice{}}
	stopFleet, err := observeEach(ctx, informers, &policyhubv1.FleetPolicy{}, t.observe)
	if err != nil {
		return nil, nil, err
	}
	stopSlices, err := observeEach(ctx, informers, &policyhubv1.ClusterStatusSlice{}, t.observe)
	if err != nil {
		stopFleet()
		return nil, nil, err
	}
	return t, func() { stopFleet(); stopSlices() }, nil
}

// observeEach calls observe with every version of obj's kind the informer sees added or
// updated; the returned function stops that.
func observeEach(ctx context.Context, informers cache.Informers, obj client.Object, observe func(any)) (func(), error) {
	informer, err := informers.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = informer.RemoveEventHandler(reg) }, nil
}

func (t *tracker) observe(obj any) {
	now := time.Now()
	if fp, ok := obj.(*policyhubv1.FleetPolicy); ok && strings.HasPrefix(fp.Name, t.prefix) {
		t.mu.Lock()
		t.latest[fp.Name] = fp
		t.mu.Unlock()
		return
	}
	slice, ok := obj.(*policyhubv1.ClusterStatusSlice)
	if !ok || slice.Declaration.Kind != policyhubv1.KindFleetPolicy || !strings.HasPrefix(slice.Declaration.Name, t.prefix) {
		return
	}
	name := slice.Declaration.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slices[slice.Namespace+"/"+slice.Name] = slice
	stamp := func(m map[string]map[string]time.Time, cluster string) {
		if m[name] == nil {
			m[name] = map[string]time.Time{}
		}
		if _, seen := m[name][cluster]; !seen {
			m[name][cluster] = now
		}
	}
	for _, c := range slice.Clusters {
		switch c.Phase {
		case policyhubv1.ClusterPhaseSynced:
			stamp(t.synced, c.Name)
		case policyhubv1.ClusterPhaseFailed:
			stamp(t.failed, c.Name)
		}
		if t.expect != nil && c.Results != nil {
			if want, ok := t.expect(name, c.Name); ok && *c.Results == want {
				stamp(t.results, c.Name)
			}
		}
	}
}

// setExpect sets which results count as arrived.
func (t *tracker) setExpect(f func(fp, cluster string) (policyhubv1.ResultCounts, bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expect = f
}

// kind of stamp.
type stampKind int

const (
	stampSynced stampKind = iota
	stampFailed
	stampResults
)

func (t *tracker) stamps(k stampKind) map[string]map[string]time.Time {
	switch k {
	case stampSynced:
		return t.synced
	case stampFailed:
		return t.failed
	}
	return t.results
}

// reachedAt is, for each cluster every FleetPolicy has a stamp of kind k for, the latest of
// those stamps; missing counts the (FleetPolicy, cluster) pairs without a stamp yet.
func (t *tracker) reachedAt(k stampKind, fps, clusters []string) (at map[string]time.Time, missing int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.stamps(k)
	at = map[string]time.Time{}
	for _, c := range clusters {
		var last time.Time
		complete := true
		for _, fp := range fps {
			s, ok := m[fp][c]
			if !ok {
				missing++
				complete = false
				continue
			}
			if s.After(last) {
				last = s
			}
		}
		if complete {
			at[c] = last
		}
	}
	return at, missing
}

// waitAll waits until every FleetPolicy has a stamp of kind k for every cluster, and returns the
// latest stamp; on timeout, ok is false and missing says how many pairs were still missing.
func (t *tracker) waitAll(ctx context.Context, k stampKind, fps, clusters []string, deadline time.Time) (last time.Time, missing int, ok bool) {
	for {
		at, missing := t.reachedAt(k, fps, clusters)
		if missing == 0 {
			for _, s := range at {
				if s.After(last) {
					last = s
				}
			}
			return last, 0, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, missing, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// phases counts the latest cluster entries by phase, over the scenario's FleetPolicies.
func (t *tracker) phases() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return phaseCounts(t.slices)
}

// phaseCounts counts the cluster entries of the slices by phase, e.g. "Pending 3, Synced 997".
func phaseCounts(all map[string]*policyhubv1.ClusterStatusSlice) string {
	counts := map[policyhubv1.ClusterPhase]int{}
	for _, slice := range all {
		for _, c := range slice.Clusters {
			counts[c.Phase]++
		}
	}
	var parts []string
	for p, n := range counts {
		parts = append(parts, fmt.Sprintf("%s %d", p, n))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "no cluster in any status"
	}
	return strings.Join(parts, ", ")
}

// messages returns up to n distinct messages of cluster entries in the given phase (for the report).
func (t *tracker) messages(phase policyhubv1.ClusterPhase, clusters map[string]bool, n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, slice := range t.slices {
		for _, c := range slice.Clusters {
			if c.Phase == phase && (clusters == nil || clusters[c.Name]) && !seen[c.Message] && len(out) < n {
				seen[c.Message] = true
				out = append(out, c.Name+": "+c.Message)
			}
		}
	}
	return out
}

// statusBytes is the size of each tracked FleetPolicy's .status as JSON.
func (t *tracker) statusBytes() []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []float64
	for _, fp := range t.latest {
		data, err := json.Marshal(fp.Status)
		if err == nil {
			out = append(out, float64(len(data)))
		}
	}
	slices.Sort(out)
	return out
}

// summaryTracker stamps, per cluster namespace, the first time the hub marked the summary it was
// given aggregated: status.observedGeneration at the summary's generation and Ready True, for the
// content hash written. The hub sets the cluster's policyhub_policy_results series right before
// it writes that status (hub/controllers' SummaryReconciler), so the stamp is also when the
// cluster's series are in /metrics, without scraping a /metrics page of every cluster's series.
type summaryTracker struct {
	mu     sync.Mutex
	hashes map[string]string // namespace → content hash written
	at     map[string]time.Time
}

func newSummaryTracker(ctx context.Context, informers cache.Informers) (*summaryTracker, func(), error) {
	t := &summaryTracker{hashes: map[string]string{}, at: map[string]time.Time{}}
	stop, err := observeEach(ctx, informers, &policyhubv1.PolicyReportSummary{}, t.observe)
	return t, stop, err
}

// expect registers the content hash about to be written for the cluster's summary.
func (t *summaryTracker) expect(namespace, hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hashes[namespace] = hash
}

func (t *summaryTracker) observe(obj any) {
	now := time.Now()
	s, ok := obj.(*policyhubv1.PolicyReportSummary)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if want, ok := t.hashes[s.Namespace]; !ok || want != s.Spec.ContentHash {
		return
	}
	if _, seen := t.at[s.Namespace]; seen || s.Status.ObservedGeneration != s.Generation {
		return
	}
	for _, c := range s.Status.Conditions {
		if c.Type == policyhubv1.ConditionReady && c.Status == "True" {
			t.at[s.Namespace] = now
		}
	}
}

// wait waits until every namespace has a stamp or the deadline passes, and returns the stamps.
func (t *summaryTracker) wait(namespaces []string, deadline time.Time) map[string]time.Time {
	for {
		t.mu.Lock()
		n := 0
		for _, ns := range namespaces {
			if _, ok := t.at[ns]; ok {
				n++
			}
		}
		done := n == len(namespaces)
		var out map[string]time.Time
		if done || time.Now().After(deadline) {
			out = maps.Clone(t.at)
		}
		t.mu.Unlock()
		if out != nil {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}
