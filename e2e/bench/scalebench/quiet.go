package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	for _, write := range strings.Split(b.o.quietWrite, ",") {
		q, err := b.quietRun(ctx, r, h, strings.TrimSpace(write))
		if err != nil {
			return err
		}
		r.quiet = append(r.quiet, q)
	}
	return nil
}

// quietRun is one quiet window with renewals written as write says.
func (b *bench) quietRun(ctx context.Context, r *result, h *hubProc, write string) (quietResult, error) {
	q := quietResult{write: write}
	names := r.clusterNames
	create := func(i int) error {
		now := metav1.NewMicroTime(time.Now())
		lease := coordinationv1ac.Lease(policyhubv1.AgentLeaseName, names[i]).WithSpec(coordinationv1ac.LeaseSpec().
			WithHolderIdentity("policyhub-agent/" + names[i]).
			WithLeaseDurationSeconds(int32(3 * b.o.quietHeartbeat / time.Second)).
			WithRenewTime(now))
		return b.hub.Apply(ctx, lease, client.FieldOwner("policyhub-agent"), client.ForceOwnership)
	}
	// -quiet-write chooses how a renewal is written, to compare what each costs the apiserver:
	// the agent's server-side apply, a JSON merge patch of renewTime alone, or an update of the
	// Lease last written (kubelet's way).
	last := make([]*coordinationv1.Lease, len(names))
	renew := create
	switch write {
	case "apply":
	case "merge-patch":
		renew = func(i int) error {
			patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, metav1.NewMicroTime(time.Now()).Format(metav1.RFC3339Micro))
			return b.hub.Patch(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: names[i], Name: policyhubv1.AgentLeaseName}},
				client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("policyhub-agent"))
		}
	case "update":
		renew = func(i int) error {
			lease := last[i]
			if lease == nil {
				lease = &coordinationv1.Lease{}
				if err := b.hub.Get(ctx, client.ObjectKey{Namespace: names[i], Name: policyhubv1.AgentLeaseName}, lease); err != nil {
					return err
				}
			}
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if err := b.hub.Update(ctx, lease, client.FieldOwner("policyhub-agent")); err != nil {
				last[i] = nil
				return err
			}
			last[i] = lease
			return nil
		}
	default:
		return q, fmt.Errorf("-quiet-write %q: apply, merge-patch or update", write)
	}
	logf("%s: creating %d agent Leases...", r.name, len(names))
	if err := inParallel(16, len(names), create); err != nil {
		return q, fmt.Errorf("create the agents' Leases: %w", err)
	}
	// The summary controller looks at every summary once for its Lease: let that pass.
	if _, _, ok, _ := b.settle(h, 2*time.Minute); !ok {
		logf("%s: the hub did not settle within 2m after the Leases were created; measuring anyway", r.name)
	}
	logf("%s: %d agents renewing their Leases (%s) every %s, nothing else changing, for %s...", r.name, len(names), write, b.o.quietHeartbeat, b.o.quiet)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	done := pacedWrites(start, start.Add(b.o.quiet), b.o.quietHeartbeat, len(names), func(ci, _ int) error { return renew(ci) })
	took := time.Since(start)
	after := b.snapshot(h)
	q.took = took
	q.renewals, q.failed = done.made, done.failed
	q.cores = coresBetween(before, after, took)
	q.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	logf("%s: quiet fleet (%s): %d renewals (%d failed) in %s; hub apiserver %.3f cores, hub %.3f cores; writes %s", r.name, write, q.renewals, q.failed,
		took.Round(time.Second), q.cores[partHubAPIServer], q.cores[partHub], writesLine(q.hubWrites))
	return q, nil
}
