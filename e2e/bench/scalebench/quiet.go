package main

import (
	"context"
	"errors"
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
// its Lease once a heartbeat (-quiet-heartbeat; 0, the default: the one the hub publishes, as
// agents keep it), spread evenly, for -quiet, and
// pushes nothing else. Before the window every Lease is renewed once (created), so the window
// holds only renewals. It measures what that costs the hub: cores of every part and writes by
// resource on the hub's apiserver.
func (b *bench) quietFleet(ctx context.Context, r *result, h *hubProc) error {
	if b.o.quiet <= 0 {
		return nil
	}
	beat, from := b.o.quietHeartbeat, "-quiet-heartbeat"
	if beat < 0 {
		return fmt.Errorf("-quiet-heartbeat %s: 0 (the hub's) or more", beat)
	}
	if beat == 0 {
		var err error
		if beat, err = b.publishedHeartbeat(ctx, r); err != nil {
			return err
		}
		from = "published"
	}
	for _, write := range strings.Split(b.o.quietWrite, ",") {
		q, err := b.quietRun(ctx, r, h, strings.TrimSpace(write), beat)
		if err != nil {
			return err
		}
		q.heartbeat, q.heartbeatFrom = beat, from
		r.quiet = append(r.quiet, q)
	}
	return nil
}

// publishedHeartbeat is the heartbeat the hub publishes to the agents
// (status.pacing.heartbeatInterval), read from the first cluster's summary, which the
// aggregation wrote: what a real agent renews by. It waits for it at most a minute.
func (b *bench) publishedHeartbeat(ctx context.Context, r *result) (time.Duration, error) {
	if len(r.clusterNames) == 0 {
		return 0, errors.New("quiet fleet: no cluster to read the published heartbeat from")
	}
	key := client.ObjectKey{Namespace: r.clusterNames[0], Name: policyhubv1.SummaryName}
	deadline := time.Now().Add(time.Minute)
	for {
		var s policyhubv1.PolicyReportSummary
		err := b.hub.Get(ctx, key, &s)
		if err == nil && s.Status.Pacing != nil {
			beat := s.Status.Pacing.HeartbeatInterval.Duration
			if beat < policyhubv1.MinHeartbeatInterval || beat > policyhubv1.MaxPacingInterval {
				return 0, fmt.Errorf("quiet fleet: %s's summary publishes heartbeat %s, outside [%s, %s]", key.Namespace, beat, policyhubv1.MinHeartbeatInterval, policyhubv1.MaxPacingInterval)
			}
			logf("%s: the hub publishes heartbeat %s (push interval %s) for %d clusters in %s's summary: the quiet fleet renews by it", r.name, beat,
				s.Status.Pacing.PushInterval.Duration, s.Status.Pacing.Clusters, key.Namespace)
			return beat, nil
		}
		if !time.Now().Before(deadline) {
			if err == nil {
				err = errors.New("no status.pacing")
			}
			return 0, fmt.Errorf("quiet fleet: read the published heartbeat from %s's summary: %w (-quiet-heartbeat 1m renews at the agent's own default)", key.Namespace, err)
		}
		time.Sleep(time.Second)
	}
}

// quietRun is one quiet window with renewals written as write says.
func (b *bench) quietRun(ctx context.Context, r *result, h *hubProc, write string, beat time.Duration) (quietResult, error) {
	q := quietResult{write: write}
	names := r.clusterNames
	create := func(i int) error {
		now := metav1.NewMicroTime(time.Now())
		lease := coordinationv1ac.Lease(policyhubv1.AgentLeaseName, names[i]).WithSpec(coordinationv1ac.LeaseSpec().
			WithHolderIdentity("policyhub-agent/" + names[i]).
			WithLeaseDurationSeconds(int32(3 * beat / time.Second)).
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
	logf("%s: %d agents renewing their Leases (%s) every %s, nothing else changing, for %s...", r.name, len(names), write, beat, b.o.quiet)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	done := pacedWrites(start, start.Add(b.o.quiet), beat, len(names), func(ci, _ int) error { return renew(ci) })
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
