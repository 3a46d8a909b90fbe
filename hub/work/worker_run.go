package work

import (
	"context"
	"sort"
	"time"

	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// run is the worker's loop: wait for work (a want, drift, a retry or the resync), let more
// arrive for Window, then make one pass over everything dirty. The Lease a pass takes is kept
// while work keeps coming and given up when the worker goes idle.
func (ws *Workers) run(ctx context.Context, w *worker) {
	defer close(w.done)
	defer ws.syncer.ReleaseLease(w.cluster.Name)
	var retry, resync, recheck <-chan time.Time
	var retryTimer, resyncTimer, recheckTimer *time.Timer
	arm := func(timer **time.Timer, ch *<-chan time.Time, after time.Duration) {
		if *timer != nil {
			(*timer).Stop()
		}
		*timer = time.NewTimer(after)
		*ch = (*timer).C
	}
	if ws.opts.Resync > 0 {
		arm(&resyncTimer, &resync, ws.opts.Resync)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-retry:
			retry = nil
			ws.markFailed(w)
		case <-resync:
			arm(&resyncTimer, &resync, ws.opts.Resync)
			ws.markAll(w)
		case <-recheck:
			// A flooded cluster has no watch: drift there is looked for at each recount.
			recheck = nil
			ws.markAll(w)
		}
		if ws.opts.Window > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(ws.opts.Window): // a batching window, not synchronisation
			}
		}
		if ws.opts.Works != nil && !ws.opts.Works(w.cluster.Name) {
			// Another replica works the cluster now: its worker is forgotten soon.
			ws.syncer.ReleaseLease(w.cluster.Name)
			continue
		}
		decls, tokens, refused := ws.takeDirty(w)
		if len(decls) == 0 {
			ws.syncer.ReleaseLease(w.cluster.Name)
			continue
		}
		if again := ws.pass(ctx, w, decls, tokens, refused); again > 0 {
			arm(&retryTimer, &retry, again)
		}
		ws.mu.Lock()
		idle, flooded := len(w.dirty) == 0, w.flooded
		ws.mu.Unlock()
		if flooded && recheck == nil {
			arm(&recheckTimer, &recheck, ws.syncer.opts.FloodRecheck)
		}
		if idle {
			ws.syncer.ReleaseLease(w.cluster.Name)
		} else {
			w.poke()
		}
	}
}

// maxPassDeclarations bounds the declarations one pass syncs. A pass publishes its results when
// it ends: a burst of hundreds of declarations in one pass kept every result back for seconds
// (bench-sync: 1.2-2.4 s passes). Planning a pass reads the watch cache, so more passes cost
// little; passes of 128 converged no faster in bench-sync, of 16 slower.
const maxPassDeclarations = 32

// takeDirty returns the declarations the next pass syncs (at most maxPassDeclarations), with
// their tokens and refusals (see refusals), and clears them. A declaration its tenant's budget
// refuses is synced as wanting nothing in the cluster: what it held there is removed.
func (ws *Workers) takeDirty(w *worker) ([]Declaration, []string, []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	sources := make([]string, 0, len(w.dirty))
	for source := range w.dirty {
		if _, ok := w.wants[source]; ok {
			sources = append(sources, source)
		}
	}
	clear(w.dirty)
	sort.Strings(sources)
	if len(sources) > maxPassDeclarations {
		for _, source := range sources[maxPassDeclarations:] {
			w.dirty[source] = true // the next pass's
		}
		sources = sources[:maxPassDeclarations]
	}
	decls := make([]Declaration, len(sources))
	tokens := make([]string, len(sources))
	for i, source := range sources {
		decls[i], tokens[i] = w.wants[source].decl, w.wants[source].token
		if _, refused := w.refused[source]; refused {
			d := decls[i]
			decls[i] = Declaration{Source: d.Source, Prune: true, DryRun: d.DryRun, Tenant: d.Tenant, Created: d.Created}
		}
	}
	return decls, tokens, refusals(w, sources)
}

func (ws *Workers) markAll(w *worker) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for source := range w.wants {
		w.dirty[source] = true
	}
}

// markFailed marks for a pass the declarations whose last result is not final (the cluster was
// unreachable, a write failed, the Lease was held), and in a flooded cluster those Kyverno has not
// confirmed yet.
func (ws *Workers) markFailed(w *worker) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for source := range w.wants {
		if r, ok := w.results[source]; !ok || retried(r.DeclarationResult) || (w.flooded && w.awaiting[source] != nil) {
			w.dirty[source] = true
		}
	}
}

// retried says whether a result is tried again with backoff: a failure may pass, a refusal for
// the tenant's budget does not (a change of the tenant's declarations decides again).
func retried(r DeclarationResult) bool {
	switch r.Phase {
	case policyhubv1.ClusterPhaseFailed:
		return !OverBudget(true, r.Message)
	case policyhubv1.ClusterPhaseLockHeld, policyhubv1.ClusterPhasePending:
		return true
	}
	return false
}

// pass syncs decls into the worker's cluster and publishes the results, the refused ones' as
// their refusal (refused). It returns when to try again (zero: no retry needed).
func (ws *Workers) pass(ctx context.Context, w *worker, decls []Declaration, tokens, refused []string) time.Duration {
	ws.mu.Lock()
	cluster := w.cluster
	first := ws.first[cluster.Name]
	delete(ws.first, cluster.Name) // once: the takeover pass
	ws.mu.Unlock()
	// Taken before the pass writes: what Kyverno evaluates after a write is later than this.
	wroteAt := time.Now()
	// The probe runs before a pass slot is taken: a dark cluster never holds one.
	handed := make(map[string]string, len(decls))
	for i, d := range decls {
		handed[d.Source] = tokens[i]
	}
	res := ws.syncer.SyncWith(ctx, cluster, decls, PassOptions{KeepLease: true, Slots: ws.passes, First: first,
		Superseded: func(source string) bool {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			want, ok := w.wants[source]
			return !ok || want.token != handed[source]
		}})
	refuse(res, refused)
	if ws.opts.Observe != nil {
		ws.opts.Observe(res)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ctx.Err() != nil {
		return 0 // stopped (Forget, Close): nothing to publish
	}
	// Which synced declarations Kyverno has not confirmed yet. Read under ws.mu: a readiness
	// change the cache gets after this read waits in ownedChanged for the lock, and then finds
	// what it confirms in w.awaiting. (The cache's store is updated before its handlers run, so
	// reading it here does not wait for them.)
	waiting := make([]map[plan.Key]bool, len(res.Declarations))
	for i, r := range res.Declarations {
		if r.Phase == policyhubv1.ClusterPhaseSynced {
			waiting[i] = ws.syncer.unconfirmed(ctx, cluster.Name, decls[i])
			// A cluster given only a preview's shadow is not protected by it: a shadow never denies.
			r.InForce = ptr.To(len(waiting[i]) == 0 && !onlyShadows(decls[i]))
		}
	}
	w.seq++
	var changed []string
	failed := false
	for i, r := range res.Declarations {
		want, still := w.wants[r.Source]
		if !still || want.token != tokens[i] {
			continue // superseded meanwhile: the next pass answers the new want
		}
		a := r.Actions
		next := Result{DeclarationResult: *r, Token: tokens[i], Seq: w.seq,
			Wrote: a.Created+a.Updated+a.Deleted > 0 && r.Phase != policyhubv1.ClusterPhaseDryRun}
		if next.Wrote {
			next.WroteAt = wroteAt
		} else if prev, ok := w.results[r.Source]; ok {
			next.WroteAt = prev.WroteAt
		}
		if retried(*r) {
			failed = true
		}
		if len(waiting[i]) > 0 {
			w.awaiting[r.Source] = waiting[i]
			// A flooded cluster has no watch to tell when Kyverno confirms: asked again, with backoff.
			failed = failed || res.Flooded
		} else {
			delete(w.awaiting, r.Source)
		}
		if prev, ok := w.results[r.Source]; ok && (sameResult(prev, next) || confirms(prev, next)) {
			if equalBool(prev.InForce, next.InForce) {
				continue
			}
			// Nothing new but Kyverno's word: the known result stays, in force or not.
			prev.InForce, prev.Wrote, prev.Seq = next.InForce, false, w.seq
			next = prev
		}
		w.results[r.Source] = next
		changed = append(changed, r.Source)
	}
	w.flooded = res.Flooded
	log := ctrllog.FromContext(ctx)
	switch {
	case IsUnreachable(res.Err):
		if w.unreachable == nil {
			log.Info("cluster unreachable; its declarations are shown Failed and retried with backoff", "reason", res.Err.Error())
		}
		w.unreachable = res.Err
		// Every declaration wanted here learns it, not only the ones of this pass.
		changed = append(changed, ws.publishUnreachable(w, nil)...)
		failed = true
	case w.unreachable != nil:
		log.Info("cluster reachable again")
		w.unreachable = nil
		for source := range w.wants {
			if r, ok := w.results[source]; !ok || retried(r.DeclarationResult) {
				w.dirty[source] = true
			}
		}
	}
	if len(changed) > 0 && ws.opts.Published != nil {
		ws.opts.Published(cluster.Name, changed)
	}
	if !failed {
		w.failures = 0
		return 0
	}
	delay := ws.opts.RetryMin << min(w.failures, 16)
	w.failures++
	return min(delay, ws.opts.RetryMax)
}

// publishUnreachable records the cluster's unreachable error as the result of the declarations
// of sources (every wanted one when nil) that do not already say so, and returns them. ws.mu is
// held; the caller publishes.
func (ws *Workers) publishUnreachable(w *worker, sources []string) []string {
	if sources == nil {
		for source := range w.wants {
			sources = append(sources, source)
		}
	}
	msg := policyhubv1.TruncateMessage(w.unreachable.Error(), 2048)
	var changed []string
	for _, source := range sources {
		want := w.wants[source]
		prev, ok := w.results[source]
		if ok && prev.Token == want.token && prev.Phase == policyhubv1.ClusterPhaseFailed && prev.Message == msg {
			continue
		}
		if changed == nil {
			w.seq++ // a new result, newer than any before
		}
		w.results[source] = Result{
			DeclarationResult: DeclarationResult{Source: source, Phase: policyhubv1.ClusterPhaseFailed, Message: msg},
			Token:             want.token, Seq: w.seq,
		}
		changed = append(changed, source)
	}
	return changed
}
