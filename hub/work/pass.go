package work

import (
	"context"
	"fmt"
	"slices"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Sync makes the cluster hold what the declarations want. It reads first and writes only when
// something differs: a resync with nothing changed sends reads and persists nothing, not even the
// Lease. Real writes happen under the cluster's sync Lease, conditional on what they were planned
// from; dry-run declarations send their requests with dryRun=All and need no Lease. A failure is
// reported per declaration; Sync itself never fails.
func (s *Syncer) Sync(ctx context.Context, cluster Cluster, decls []Declaration) *ClusterResult {
	return s.SyncWith(ctx, cluster, decls, PassOptions{})
}

// SyncKeepingLease is Sync, except that a sync Lease it takes stays held (renewed in the
// background) after it returns, until ReleaseLease: back-to-back syncs of a cluster then share one
// Lease session. Other writers wait meanwhile, so the caller releases it as soon as it has no
// more work for the cluster.
func (s *Syncer) SyncKeepingLease(ctx context.Context, cluster Cluster, decls []Declaration) *ClusterResult {
	return s.SyncWith(ctx, cluster, decls, PassOptions{KeepLease: true})
}

// PassOptions tune one SyncWith pass.
type PassOptions struct {
	// KeepLease keeps a sync Lease the pass takes (see SyncKeepingLease).
	KeepLease bool
	// Slots, when not nil, bound the passes planning and writing at once across clusters: once
	// the cluster has answered its probe, the pass holds a slot for the rest of its work.
	Slots *Slots
	// First lets the pass in before every waiting pass not First (a cluster inherited from a
	// dead replica).
	First bool
	// Superseded, when set, says a declaration (by source) was handed a newer wanted state since
	// the pass began. It is asked under the Lease, right before each write: a replica that
	// rendered a moment behind another (its cache had not seen a change yet), or waited on the
	// Lease meanwhile, would otherwise write the older content over the newer the other replica
	// wrote, and each change would cost the cluster extra writes. A superseded declaration is
	// left Pending; its next pass writes the newer state.
	Superseded func(source string) bool
}

// SyncWith is Sync, tuned by opts.
func (s *Syncer) SyncWith(ctx context.Context, cluster Cluster, decls []Declaration, opts PassOptions) *ClusterResult {
	start := time.Now()
	res := &ClusterResult{Cluster: cluster.Name}
	for _, d := range decls {
		res.Declarations = append(res.Declarations, &DeclarationResult{Source: d.Source, Phase: policyhubv1.ClusterPhasePending})
	}
	cc, err := s.clientsFor(cluster)
	if err != nil {
		res.Err = err
		res.fail(nil, err)
		return res
	}
	requests0, writes0, dryRuns0 := cc.requests.Load(), cc.writes.Load(), cc.dryRuns.Load()
	defer func() {
		if count, flooded := s.Flooded(cluster.Name); flooded {
			res.flooded(&TooManyOwnedError{Cluster: cluster.Name, Count: count, Max: s.opts.MaxOwnedObjects, Recheck: s.opts.FloodRecheck})
		}
		res.Requests, res.Writes, res.DryRuns = cc.requests.Load()-requests0, cc.writes.Load()-writes0, cc.dryRuns.Load()-dryRuns0
		res.Duration = time.Since(start)
		logSync(ctx, res)
	}()

	// One cheap request with a short deadline tells a dark cluster apart before anything else
	// (discovery, the cache, the Lease) waits on it.
	if err := s.probe(ctx, cc, cluster.Name); err != nil {
		res.Err = err
		res.fail(nil, err)
		// A dark cluster's watch cache would keep retrying through the gateway: it is
		// dropped now and made again once the cluster answers.
		s.dropClients(cluster.Name, cc)
		return res
	}
	if opts.Slots != nil {
		release, err := opts.Slots.Acquire(ctx, opts.First)
		if err != nil {
			res.fail(nil, err)
			return res
		}
		defer release()
	}

	// Render for the cluster's Kyverno: the policies.kyverno.io versions it serves (versions.go);
	// a field its version lacks makes the declaration Unsupported, as a kind it does not serve.
	decls, versionMessages, versionErrs := forServedVersions(cc.client.RESTMapper(), cluster.Name, decls)
	// Capability: a declaration with a kind the cluster does not serve is Unsupported, one its
	// Kyverno serves but does not enforce is NotEnforced (see legacy.go); nothing of either is sent.
	engine := s.kyvernoVersion(cluster.Name)
	active := make([]int, 0, len(decls))
	// Declarations whose legacy objects the cluster does not enforce but whose other objects are
	// synced (see withoutLegacy): NotEnforced once the pass is done, if nothing worse happened.
	partial := map[int]string{}
	defer func() {
		for i, message := range partial {
			if r := res.Declarations[i]; r.Phase == policyhubv1.ClusterPhaseSynced || r.Phase == policyhubv1.ClusterPhaseDryRun {
				r.notEnforced(message)
			}
		}
	}()
	// Declarations whose other objects are synced while their Constraints wait for Gatekeeper to
	// serve their kinds (see withoutUnservedConstraints): Pending once the pass is done, unless
	// something worse happened.
	pendingRest := map[int]string{}
	defer func() {
		for i, message := range pendingRest {
			if r := res.Declarations[i]; r.Phase == policyhubv1.ClusterPhaseSynced || r.Phase == policyhubv1.ClusterPhaseDryRun {
				r.Phase, r.Message = policyhubv1.ClusterPhasePending, message
			}
		}
	}()
	for i, d := range decls {
		message, err := versionMessages[i], versionErrs[i]
		pending := false
		if message == "" && err == nil {
			message, pending, err = s.unsupported(cc, cluster.Name, d.Objects)
		}
		if err != nil {
			res.Err = fmt.Errorf("cluster %s: discovery: %w", cluster.Name, err)
			res.fail([]int{i}, res.Err)
			continue
		}
		if pending {
			// A set holding templates and their Constraints: the templates (and the rest) are
			// written now, so that Gatekeeper can make the kinds the Constraints wait for.
			rest, mixed := withoutUnservedConstraints(d, cc.client.RESTMapper())
			if !mixed {
				r := res.Declarations[i]
				r.Phase, r.Message = policyhubv1.ClusterPhasePending, message
				continue
			}
			d, decls[i], pendingRest[i], message = rest, rest, message, ""
		}
		if message != "" {
			r := res.Declarations[i]
			r.Phase = policyhubv1.ClusterPhaseUnsupported
			r.Message = message
		} else if why := s.notEnforced(cluster.Name, d, engine); why != "" {
			message := notEnforcedMessage(cluster.Name, why, d.Objects)
			if rest, mixed := withoutLegacy(d); mixed {
				decls[i], partial[i] = rest, message
				active = append(active, i)
			} else {
				res.Declarations[i].notEnforced(message)
			}
		} else {
			active = append(active, i)
		}
	}
	if len(active) == 0 {
		return res
	}

	readStart := time.Now()
	work, err := s.plan(ctx, cc, decls, active, nil, nil, true)
	res.ReadTime += time.Since(readStart)
	if err != nil {
		res.Err = fmt.Errorf("cluster %s: read live policies: %w", cluster.Name, err)
		res.fail(active, res.Err)
		return res
	}
	var dryRun, real []int
	for _, i := range active {
		switch {
		case decls[i].DryRun:
			dryRun = append(dryRun, i)
		case work.needsWrite(i):
			// Kyverno is asked whether it reads an exception when the exception is to be written
			// (one dry-run each): a quiet fleet asks nothing.
			if message := s.kyvernoIgnoresExceptions(ctx, cc, cluster.Name, decls[i].Objects); message != "" {
				r := res.Declarations[i]
				r.Phase, r.Message = policyhubv1.ClusterPhaseUnsupported, message
				continue
			}
			real = append(real, i)
		default:
			res.record(i, work, false)
		}
	}
	writeStart := time.Now()
	s.write(ctx, cc, work, dryRun, true)
	res.WriteTime += time.Since(writeStart)
	for _, i := range dryRun {
		res.record(i, work, true)
	}
	s.refusedLegacy(cluster.Name, decls, dryRun, work, res, engine)
	if len(real) == 0 {
		return res
	}
	lockStart := time.Now()
	writer := s.writer(cluster.Name)
	writer.Lock()
	defer writer.Unlock()
	err = s.underLease(ctx, cc, cluster.Name, opts.KeepLease, func(ctx context.Context, session Session) error {
		res.LockTime += time.Since(lockStart)
		if real = current(real, decls, opts.Superseded); len(real) == 0 {
			return nil
		}
		// Another writer held the Lease since this process did: the cache may not have its
		// writes yet, so the kinds about to be written are read again. Otherwise the cache's
		// plan stands: every write carries the version it was planned from (see Apply), so
		// a plan the cluster has moved past is refused, never applied.
		if !session.Alone {
			if err := s.replan(ctx, cc, decls, real, work, res); err != nil {
				return err
			}
		}
		writeStart := time.Now()
		s.write(ctx, cc, work, real, false)
		res.WriteTime += time.Since(writeStart)
		// Writes refused because the object changed since it was read: read again and redo
		// those declarations, once; a second refusal is reported and retried later.
		if refused := current(work.refused(real), decls, opts.Superseded); len(refused) > 0 {
			if err := s.replan(ctx, cc, decls, refused, work, res); err != nil {
				return err
			}
			writeStart := time.Now()
			s.write(ctx, cc, work, refused, false)
			res.WriteTime += time.Since(writeStart)
		}
		return nil
	})
	switch {
	case IsLockHeld(err):
		for _, i := range real {
			r := res.Declarations[i]
			r.Phase, r.Message = policyhubv1.ClusterPhaseLockHeld, err.Error()
		}
	case err != nil:
		res.fail(real, err)
	default:
		for _, i := range real {
			res.record(i, work, false)
		}
		s.refusedLegacy(cluster.Name, decls, real, work, res, engine)
	}
	return res
}

// current are the indexes of which whose declarations superseded does not say were superseded
// (all of them when superseded is nil).
func current(which []int, decls []Declaration, superseded func(source string) bool) []int {
	if superseded == nil {
		return which
	}
	return slices.DeleteFunc(which, func(i int) bool { return superseded(decls[i].Source) })
}

// kyvernoVersion is the Kyverno version the cluster's engine facts say ("" when unknown).
func (s *Syncer) kyvernoVersion(cluster string) string {
	if s.opts.KyvernoVersion == nil {
		return ""
	}
	return s.opts.KyvernoVersion(cluster)
}

// notEnforced says why the cluster's Kyverno does not enforce the legacy objects of d ("" when
// d has none, or nothing says so): its version, or its refusal of this very content under the
// same engine facts.
func (s *Syncer) notEnforced(cluster string, d Declaration, engine string) string {
	if len(legacyKindsOf(d.Objects)) == 0 {
		return ""
	}
	if why := versionSaysNotEnforced(engine); why != "" {
		return why
	}
	if message, ok := s.refusals.refused(cluster, d, engine); ok {
		return refusalEvidence(message)
	}
	return ""
}

// refusedLegacy makes the declarations of which that Kyverno refused a write of (its legacy
// refusal) NotEnforced, and remembers the refusal so that the same content is not sent again
// under the same engine facts.
func (s *Syncer) refusedLegacy(cluster string, decls []Declaration, which []int, w *workPlan, res *ClusterResult, engine string) {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	for _, c := range w.changes {
		if !selected[c.decl] {
			continue
		}
		message := legacyRefusal(c.desired, c.err)
		if message == "" {
			continue
		}
		delete(selected, c.decl) // one refusal says it
		d := decls[c.decl]
		s.refusals.remember(cluster, d, engine, message)
		res.Declarations[c.decl].notEnforced(notEnforcedMessage(cluster, refusalEvidence(message), d.Objects))
	}
}

// replan reads the cluster directly (not from the cache) for the kinds the declarations of
// indexes which would write, and replaces their plan in work.
func (s *Syncer) replan(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, work *workPlan, res *ClusterResult) error {
	readStart := time.Now()
	fresh, err := s.plan(ctx, cc, decls, which, work.kindsWritten(which), work.live, false)
	res.ReadTime += time.Since(readStart)
	if err != nil {
		return fmt.Errorf("cluster %s: read live policies: %w", res.Cluster, err)
	}
	work.replace(which, fresh)
	return nil
}
