package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// quietFleet is the steady state of a fleet where nothing changes: every cluster's agent renews
// its Lease once a -quiet-heartbeat (the agent's default, 1m), spread evenly, for -quiet, and
// pushes nothing else. Before the window every Lease is renewed once (created), so the window
// holds only renewals. It measures what that costs the hub: cores of every part and writes by
// resource on the hub's apiserver.
func (b *bench) quietFleet(ctx context.Context, r *result, h *hubProc) error {
	if b.o.quiet <= 0 {
		return nil
	}
	names := r.clusterNames
	renew := func(i int) error {
		now := metav1.NewMicroTime(time.Now())
		lease := coordinationv1ac.Lease(policyhubv1.AgentLeaseName, names[i]).WithSpec(coordinationv1ac.LeaseSpec().
			WithHolderIdentity("policyhub-agent/" + names[i]).
			WithLeaseDurationSeconds(int32(3 * b.o.quietHeartbeat / time.Second)).
			WithRenewTime(now))
		return b.hub.Apply(ctx, lease, client.FieldOwner("policyhub-agent"), client.ForceOwnership)
	}
	logf("%s: creating %d agent Leases...", r.name, len(names))
	if err := inParallel(16, len(names), renew); err != nil {
		return fmt.Errorf("create the agents' Leases: %w", err)
	}
	// The summary controller looks at every summary once for its Lease: let that pass.
	if _, _, ok, _ := b.settle(h, 2*time.Minute); !ok {
		logf("%s: the hub did not settle within 2m after the Leases were created; measuring anyway", r.name)
	}
	logf("%s: %d agents renewing their Leases every %s, nothing else changing, for %s...", r.name, len(names), b.o.quietHeartbeat, b.o.quiet)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	spacing := time.Duration(float64(b.o.quietHeartbeat) / float64(len(names)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed int
	sem := make(chan struct{}, 200)
	renewals := 0
	for n := 0; ; n++ {
		at := start.Add(time.Duration(n) * spacing)
		if !at.Before(start.Add(b.o.quiet)) {
			break
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		sem <- struct{}{}
		renewals++
		wg.Go(func() {
			defer func() { <-sem }()
			if err := renew(n % len(names)); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	after := b.snapshot(h)
	r.quiet.ran = true
	r.quiet.took = took
	r.quiet.renewals, r.quiet.failed = renewals, failed
	r.quiet.cores = map[string]float64{}
	for part, cpu := range cpuBetween(before, after) {
		r.quiet.cores[part] = cpu / took.Seconds()
	}
	r.quiet.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	logf("%s: quiet fleet: %d renewals (%d failed) in %s; hub apiserver %.3f cores, hub %.3f cores; writes %s", r.name, renewals, failed,
		took.Round(time.Second), r.quiet.cores[partHubAPIServer], r.quiet.cores[partHub], writesLine(r.quiet.hubWrites))
	return nil
}
