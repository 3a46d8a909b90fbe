package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
)

// startHub starts a policyhub-hub with only the flags the benchmark relies on.
func (b *bench) startHub(ctx context.Context, hubID, secretNamespace string) (*hubProc, error) {
	return b.startNamedHub(ctx, hubID, hubID, secretNamespace)
}

// startNamedHub starts a policyhub-hub logging to policyhub-hub-<name>.log, with extra flags.
func (b *bench) startNamedHub(ctx context.Context, name, hubID, secretNamespace string, extra ...string) (*hubProc, error) {
	h, err := startHub(b.hubBin, "policyhub-hub "+name, filepath.Join(b.logDir, "policyhub-hub-"+name+".log"), append([]string{
		"--kubeconfig=" + b.f.Hub.Kubeconfig,
		"--hub-id=" + hubID,
		"--leader-elect=false",
		"--gateway-secret-namespace=" + secretNamespace,
		"--resync-interval=1h",
		// The hub's own namespace (FleetPolicies' ClusterStatusSlices): one the fleet has.
		"--leader-election-namespace=" + b.f.SecretNamespace,
	}, extra...)...)
	if err != nil {
		return nil, err
	}
	if err := h.waitReady(ctx, time.Minute); err != nil {
		_, _, _ = h.stop()
		return nil, err
	}
	return h, nil
}

// measureIdle measures a hub with no cluster and no FleetPolicy: the fleet's secret namespace
// holds the real clusters, so this hub reads an empty one instead.
func (b *bench) measureIdle(ctx context.Context) error {
	const empty = "bench-no-clusters"
	if err := b.hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: empty}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	baseline, err := b.openWatches(ctx)
	if err != nil {
		return err
	}
	logf("idle hub (no cluster, no FleetPolicy)...")
	h, err := b.startHub(ctx, "bench-idle", empty)
	if err != nil {
		return err
	}
	defer func() { _, _, _ = h.stop() }()
	if b.idle, err = b.measureState(ctx, h, baseline, time.Minute); err != nil {
		return err
	}
	logf("idle hub: RSS %s, goroutines %.0f, watches %+.0f", mib(b.idle.rss), b.idle.goroutines, b.idle.watches)
	_, _, err = h.stop()
	return err
}

// converge runs one scenario's hub from start to a settled state: starts it, creates the
// FleetPolicies (the clock starts at the first), waits until wait says they converged, and
// measures the hub settled. The hub is returned running.
func (b *bench) converge(ctx context.Context, r *result, set string, wait func(t *tracker, deadline time.Time)) (*hubProc, *tracker, error) {
	baseline, err := b.openWatches(ctx)
	if err != nil {
		return nil, nil, err
	}
	h, err := b.startHub(ctx, r.hubID, b.f.SecretNamespace)
	if err != nil {
		return nil, nil, err
	}
	r.logPath = h.logPath
	// The hub reads its inventory and the gateway before any policy exists: not on the clock.
	b.settle(h, 30*time.Second)
	t, stopTracking, err := newTracker(ctx, b.informer, r.prefix)
	if err != nil {
		return h, nil, err
	}
	_ = stopTracking // kept for the life of the run: the dark scenario reads the virtual one's stamps
	b.trackers[r.name] = t
	// A scenario may name its FleetPolicies itself (sets: as many as the set's members).
	if len(r.fps) == 0 {
		for i := range b.o.policies {
			r.fps = append(r.fps, fmt.Sprintf("%s-%d", r.prefix, i))
		}
	}
	logf("%s: creating %d FleetPolicies for %d clusters...", r.name, len(r.fps), r.clusters)
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	r.start = time.Now()
	waitProfile := b.profileCPU(ctx, h, 30*time.Second, r.name+"-converge-cpu.pb.gz")
	defer waitProfile()
	err = inParallel(8, len(r.fps), func(i int) error {
		fp, err := benchkit.FleetPolicy(r.fps[i], i, map[string]string{setLabel: set})
		if err != nil {
			return err
		}
		return b.hub.Create(ctx, fp)
	})
	if err != nil {
		return h, t, err
	}
	stopProgress := b.progress(r.name, t, func() []*hubProc { return []*hubProc{h} }, &replicasFleet{})
	wait(t, r.start.Add(b.o.timeout))
	stopProgress()
	r.cpu = cpuBetween(before, b.snapshot(h))
	r.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	r.phases = t.phases()
	logf("%s: converged: %s; statuses: %s", r.name, fmtDur(r.converge, r.converged, b.o.timeout), r.phases)
	logf("%s: CPU seconds while converging %v; RSS now %v", r.name, r.cpu, rssByPart(b.snapshot(h)))
	if err := h.exitError(); err != nil {
		return h, t, err
	}
	if r.state, err = b.measureState(ctx, h, baseline, 2*time.Minute); err != nil {
		return h, t, err
	}
	logf("%s: RSS %s, goroutines %.0f, watches %.0f, settled %v", r.name, mib(r.state.rss), r.state.goroutines, r.state.watches, r.state.settled)
	b.saveProfile(ctx, h, "heap", "gc=1", r.name+"-heap.pb.gz")
	b.saveProfile(ctx, h, "goroutine", "debug=1", r.name+"-goroutine.txt")
	r.statusSynced = t.statusBytes()
	return h, t, nil
}

// waitSynced is the convergence wait of the real and virtual scenarios.
func (b *bench) waitSynced(r *result) func(t *tracker, deadline time.Time) {
	return func(t *tracker, deadline time.Time) {
		last, missing, ok := t.waitAll(context.Background(), stampSynced, r.fps, r.clusterNames, deadline)
		r.converged, r.missing = ok, missing
		if ok {
			r.converge = last.Sub(r.start)
		}
	}
}

// finish stops the scenario's hub and removes its FleetPolicies (their finalizers first: the hub
// that would prune is gone, and what it wrote in the clusters carries its own hub id, which no
// later scenario's hub touches).
func (b *bench) finish(ctx context.Context, r *result, h *hubProc) error {
	var stopErr error
	r.stopTook, r.stopKilled, stopErr = h.stop()
	if r.stopKilled {
		logf("%s: the hub did not end within %s of SIGTERM: killed", r.name, stopGrace)
	}
	if r.agg.ran && stopErr == nil {
		if err := b.statusFloor(ctx, r); err != nil {
			logf("%s: %v", r.name, err)
		}
	}
	r.logLines, r.logErrors = logStats(r.logPath)
	for _, name := range r.fps {
		fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := b.hub.Patch(ctx, fp, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := b.hub.Delete(ctx, fp); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return stopErr
}
