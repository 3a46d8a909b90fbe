package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// setTracker watches one PolicySet and its ClusterStatusSlices through the benchmark's informer
// and stamps, per version of the set (its source digest), the first time each cluster's entry
// showed it Synced at that version (ClusterStatus.revision), and the first time the set was Ready
// with every cluster synced while its status named that version. Stamps are taken when the event
// arrives, as tracker's are.
type setTracker struct {
	name     string
	clusters int32

	mu        sync.Mutex
	set       *policyhubv1.PolicySet
	slices    map[string]*policyhubv1.ClusterStatusSlice
	revisions map[string]map[string]time.Time // digest → cluster → first seen Synced at it
	ready     map[string]time.Time            // digest → first seen Ready, every cluster synced
}

func newSetTracker(ctx context.Context, informers cache.Informers, name string, clusters int) (*setTracker, func(), error) {
	t := &setTracker{name: name, clusters: int32(clusters), slices: map[string]*policyhubv1.ClusterStatusSlice{},
		revisions: map[string]map[string]time.Time{}, ready: map[string]time.Time{}}
	stopSets, err := observeEach(ctx, informers, &policyhubv1.PolicySet{}, t.observe)
	if err != nil {
		return nil, nil, fmt.Errorf("watch PolicySets: %w", err)
	}
	stopSlices, err := observeEach(ctx, informers, &policyhubv1.ClusterStatusSlice{}, t.observe)
	if err != nil {
		stopSets()
		return nil, nil, fmt.Errorf("watch ClusterStatusSlices: %w", err)
	}
	return t, func() { stopSets(); stopSlices() }, nil
}

func (t *setTracker) observe(obj any) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch o := obj.(type) {
	case *policyhubv1.PolicySet:
		if o.Name != t.name {
			return
		}
		t.set = o
		if d := readyDigest(o, t.clusters); d != "" {
			if _, seen := t.ready[d]; !seen {
				t.ready[d] = now
			}
		}
	case *policyhubv1.ClusterStatusSlice:
		if o.Declaration.Kind != policyhubv1.KindPolicySet || o.Declaration.Name != t.name {
			return
		}
		t.slices[o.Namespace+"/"+o.Name] = o
		for _, c := range o.Clusters {
			if c.Phase != policyhubv1.ClusterPhaseSynced || c.Revision == "" {
				continue
			}
			at := t.revisions[c.Revision]
			if at == nil {
				at = map[string]time.Time{}
				t.revisions[c.Revision] = at
			}
			if _, seen := at[c.Name]; !seen {
				at[c.Name] = now
			}
		}
	}
}

// readyDigest is the source digest of a set whose status describes its spec, is Ready, and
// counts every one of clusters synced; "" otherwise.
func readyDigest(ps *policyhubv1.PolicySet, clusters int32) string {
	st := ps.Status
	if st.Source == nil || st.Source.Digest == "" || st.ObservedGeneration != ps.Generation {
		return ""
	}
	if !apimeta.IsStatusConditionTrue(st.Conditions, policyhubv1.ConditionReady) {
		return ""
	}
	if st.Summary.Clusters != clusters || st.Summary.Synced != clusters {
		return ""
	}
	return st.Source.Digest
}

// digest is the source digest the set's status names now ("" before it names one).
func (t *setTracker) digest() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.set == nil || t.set.Status.Source == nil {
		return ""
	}
	return t.set.Status.Source.Digest
}

// setWait is how a version of the set converged.
type setWait struct {
	digest string
	// at is when it converged: the later of every cluster at the digest and the set Ready.
	at, clustersAt, readyAt time.Time
	// missing counts the clusters not synced at the digest when the wait ended.
	missing int
	ready   bool
	ok      bool
}

func (w setWait) String() string {
	if w.digest == "" {
		return "the set's status names no new version"
	}
	ready := "Ready"
	if !w.ready {
		ready = "not Ready with every cluster synced"
	}
	return fmt.Sprintf("version %s: %d clusters not synced at it, %s", shortDigest(w.digest), w.missing, ready)
}

// wait waits until the set's status names a version other than not, every one of clusters is
// synced at it, and the set is Ready with every cluster synced at it; or until the deadline.
func (t *setTracker) wait(ctx context.Context, clusters []string, not string, deadline time.Time) setWait {
	for {
		w := t.check(clusters, not)
		if w.ok || time.Now().After(deadline) || ctx.Err() != nil {
			return w
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (t *setTracker) check(clusters []string, not string) setWait {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := setWait{missing: len(clusters)}
	if t.set == nil || t.set.Status.Source == nil || t.set.Status.Source.Digest == "" || t.set.Status.Source.Digest == not {
		return w
	}
	w.digest = t.set.Status.Source.Digest
	w.readyAt, w.ready = t.ready[w.digest]
	w.missing = 0
	for _, c := range clusters {
		at, ok := t.revisions[w.digest][c]
		if !ok {
			w.missing++
			continue
		}
		if at.After(w.clustersAt) {
			w.clustersAt = at
		}
	}
	if w.missing == 0 && w.ready {
		w.ok = true
		w.at = w.clustersAt
		if w.readyAt.After(w.at) {
			w.at = w.readyAt
		}
	}
	return w
}

// phases counts the set's latest cluster entries by phase.
func (t *setTracker) phases() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return phaseCounts(t.slices)
}
