package work

import (
	"context"
	"sync"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Batcher syncs each cluster in passes: the declarations submitted for a cluster while a pass of
// it runs (or within a short window before a pass starts) are synced together in the next pass —
// one read of the cluster, all writes in parallel — instead of one sync each; back-to-back passes
// share one Lease session.
// A broken or slow cluster only delays the declarations waiting for that cluster.
type Batcher struct {
	syncer *Syncer
	// window is how long a pass waits for more declarations before it starts.
	window time.Duration
	// observe, when set, is told about every pass (metrics).
	observe func(*ClusterResult)

	mu      sync.Mutex
	workers map[string]*clusterWorker
}

// NewBatcher returns a Batcher over syncer. observe may be nil.
func NewBatcher(syncer *Syncer, window time.Duration, observe func(*ClusterResult)) *Batcher {
	return &Batcher{syncer: syncer, window: window, observe: observe, workers: map[string]*clusterWorker{}}
}

// Outcome is one declaration's result from a pass, with what the pass did to the cluster.
type Outcome struct {
	Result *DeclarationResult
	// Wrote is true when the pass created, updated or deleted an object of this declaration.
	Wrote bool
}

type submission struct {
	decl  Declaration
	reply chan Outcome
}

type clusterWorker struct {
	cluster Cluster
	pending []submission
	running bool
}

// Sync submits decl for cluster and waits for the pass that includes it. A later submission of
// the same declaration (same source) in the same pass supersedes an earlier one; both get the
// result of the later.
func (b *Batcher) Sync(ctx context.Context, cluster Cluster, decl Declaration) Outcome {
	reply := make(chan Outcome, 1)
	b.mu.Lock()
	w, ok := b.workers[cluster.Name]
	if !ok {
		w = &clusterWorker{}
		b.workers[cluster.Name] = w
	}
	w.cluster = cluster // the latest config wins (credentials may have changed)
	w.pending = append(w.pending, submission{decl: decl, reply: reply})
	if !w.running {
		w.running = true
		// The pass outlives the caller's context: other callers wait on it too.
		go b.run(context.WithoutCancel(ctx), w)
	}
	b.mu.Unlock()
	select {
	case out := <-reply:
		return out
	case <-ctx.Done():
		return Outcome{Result: &DeclarationResult{Source: decl.Source, Phase: policyhubv1.ClusterPhasePending, Message: "sync cancelled: " + ctx.Err().Error()}}
	}
}

// run makes passes over the cluster until nothing is pending. The sync Lease taken by a pass is
// kept for the next one while work keeps arriving, and given up once the cluster is idle.
func (b *Batcher) run(ctx context.Context, w *clusterWorker) {
	for {
		if b.window > 0 {
			time.Sleep(b.window) // a batching window, not synchronisation: callers wait on replies
		}
		b.mu.Lock()
		batch, cluster := w.pending, w.cluster
		w.pending = nil
		b.mu.Unlock()
		if len(batch) == 0 {
			b.syncer.ReleaseLease(cluster.Name)
			b.mu.Lock()
			idle := len(w.pending) == 0
			if idle {
				w.running = false
			}
			b.mu.Unlock()
			if idle {
				return
			}
			continue // work arrived while the Lease was given up
		}

		// One declaration per source: the last submitted.
		index := map[string]int{}
		var decls []Declaration
		for _, s := range batch {
			if i, seen := index[s.decl.Source]; seen {
				decls[i] = s.decl
				continue
			}
			index[s.decl.Source] = len(decls)
			decls = append(decls, s.decl)
		}
		res := b.syncer.SyncKeepingLease(ctx, cluster, decls)
		if b.observe != nil {
			b.observe(res)
		}
		for _, s := range batch {
			r := res.Declarations[index[s.decl.Source]]
			a := r.Actions
			wrote := a.Created+a.Updated+a.Deleted > 0 && r.Phase != policyhubv1.ClusterPhaseDryRun
			s.reply <- Outcome{Result: r, Wrote: wrote}
		}
	}
}
