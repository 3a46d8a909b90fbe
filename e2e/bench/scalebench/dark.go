package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// darkNames splits the virtual names: every 10th black-holed, every 20th (offset 5) refusing.
func darkNames(names []string) (blackHoled, refusing, healthy []string) {
	for i, n := range names {
		switch {
		case i%10 == 0:
			blackHoled = append(blackHoled, n)
		case i%20 == 5:
			refusing = append(refusing, n)
		default:
			healthy = append(healthy, n)
		}
	}
	return blackHoled, refusing, healthy
}

// runDark is the dark scenario: the virtual names with some black-holed or refusing, converged.
func (b *bench) runDark(ctx context.Context) error {
	names := b.virtualNames()
	blackHoled, refusing, healthy := darkNames(names)
	r := &result{name: "dark", hubID: "bench-dark", prefix: "dark", clusters: len(names), clusterNames: names}
	r.dark.blackHoled, r.dark.refusing = len(blackHoled), len(refusing)
	b.results = append(b.results, r)
	var holes []*fleet.BlackHole
	defer func() {
		for _, bh := range holes {
			_ = bh.Close()
		}
	}()
	for _, n := range blackHoled {
		bh, err := fleet.StartBlackHole()
		if err != nil {
			return err
		}
		holes = append(holes, bh)
		if err := b.f.SetClusterEndpoint(ctx, n, bh.URL()); err != nil {
			return err
		}
	}
	for _, n := range refusing {
		u, err := fleet.RefusingURL()
		if err != nil {
			return err
		}
		if err := b.f.SetClusterEndpoint(ctx, n, u); err != nil {
			return err
		}
	}
	logf("dark: %d names black-holed, %d refusing, %d healthy", len(blackHoled), len(refusing), len(healthy))
	// The healthy names' convergence in the virtual run, where every name answered.
	for _, v := range b.results {
		if v.name == "virtual" && v.converged {
			vt := v.start
			at, missing := b.trackerReached(v, healthy)
			if missing == 0 {
				r.dark.baseline, r.dark.baselineOK = at.Sub(vt), true
			}
		}
	}
	darkSet := append(slices.Clone(blackHoled), refusing...)
	h, t, err := b.converge(ctx, r, "virtual", func(t *tracker, deadline time.Time) {
		var wg sync.WaitGroup
		wg.Go(func() {
			last, missing, ok := t.waitAll(ctx, stampSynced, r.fps, healthy, deadline)
			r.dark.healthyOK, r.dark.healthyMissing = ok, missing
			if ok {
				r.dark.healthy = last.Sub(r.start)
			}
		})
		wg.Go(func() {
			last, missing, ok := t.waitAll(ctx, stampFailed, r.fps, darkSet, deadline)
			r.dark.failedOK, r.dark.failedMissing = ok, missing
			if ok {
				r.dark.failed = last.Sub(r.start)
			}
		})
		wg.Wait()
		r.converged, r.converge, r.missing = r.dark.healthyOK, r.dark.healthy, r.dark.healthyMissing
	})
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("dark: %w", err)
	}
	bhSet, refSet := map[string]bool{}, map[string]bool{}
	for _, n := range blackHoled {
		bhSet[n] = true
	}
	for _, n := range refusing {
		refSet[n] = true
	}
	r.dark.blackHoleMsgs = t.messages(policyhubv1.ClusterPhaseFailed, bhSet, 2)
	r.dark.refusingMsgs = t.messages(policyhubv1.ClusterPhaseFailed, refSet, 2)
	for _, bh := range holes {
		r.dark.accepted += bh.Accepted()
	}
	return b.finish(ctx, r, h)
}

// trackerReached is when the virtual run's statuses showed every given name Synced.
func (b *bench) trackerReached(v *result, names []string) (time.Time, int) {
	t := b.trackers[v.name]
	if t == nil {
		return time.Time{}, len(names)
	}
	at, missing := t.reachedAt(stampSynced, v.fps, names)
	var last time.Time
	for _, s := range at {
		if s.After(last) {
			last = s
		}
	}
	return last, missing
}
