package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
)

// runReal is the real scenario: every real cluster, one hub, the FleetPolicies converged.
func (b *bench) runReal(ctx context.Context) error {
	r := &result{name: "real", hubID: "bench-real", prefix: "real", clusters: len(b.f.Managed)}
	for _, c := range b.f.Managed {
		r.clusterNames = append(r.clusterNames, c.Name)
	}
	b.results = append(b.results, r)
	h, _, err := b.converge(ctx, r, "real", b.waitSynced(r))
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("real: %w", err)
	}
	return b.finish(ctx, r, h)
}

// virtualNames are the cluster names of the virtual and dark scenarios.
func (b *bench) virtualNames() []string {
	var out []string
	for i := range b.o.virtual {
		out = append(out, fmt.Sprintf("vc-%04d", i))
	}
	return out
}

// addVirtualClusters writes the virtual names' clusters (addClusters): a hub namespace per name
// is where its agent would write its summary.
func (b *bench) addVirtualClusters(ctx context.Context) error {
	names := b.virtualNames()
	logf("adding %d cluster names over %d apiservers...", len(names), len(b.f.Managed))
	return b.addClusters(ctx, names, func(int) map[string]string { return map[string]string{setLabel: "virtual"} }, b.leasePerName("virtual", len(names)))
}

// addClusters writes a credential Secret per name (labelled labels(i)), pointing at the real
// apiservers round-robin with their credentials, and a hub namespace per name, then waits until
// the gateway serves the last one. With leasePerName each name reaches its apiserver through the
// lease relay, with a sync Lease of its own.
func (b *bench) addClusters(ctx context.Context, names []string, labels func(i int) map[string]string, leasePerName bool) error {
	err := inParallel(16, len(names), func(i int) error {
		backend := i % len(b.f.Managed)
		real := b.f.Managed[backend]
		if leasePerName {
			if err := b.addRelayedClusterSecret(ctx, names[i], backend, labels(i)); err != nil {
				return err
			}
		} else if err := b.f.AddClusterSecret(ctx, names[i], real.URL, real.Name, labels(i)); err != nil {
			return err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}
		if err := b.hub.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	cfg, err := gateway.ClusterConfig(b.f.Hub.Config, names[len(names)-1])
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := getVersion(ctx, cfg)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway does not serve %s a minute after its Secret was written: %w", names[len(names)-1], err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// getVersion GETs /version through cfg, waiting at most 5 s.
func getVersion(ctx context.Context, cfg *rest.Config) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/version", nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

// runVirtual is the virtual scenario: the cluster names over the real apiservers, converged,
// then a no-op resync and the summaries' aggregation.
func (b *bench) runVirtual(ctx context.Context) error {
	if err := b.addVirtualClusters(ctx); err != nil {
		return fmt.Errorf("virtual: %w", err)
	}
	r := &result{name: "virtual", hubID: "bench-virtual", prefix: "virtual", clusters: b.o.virtual, clusterNames: b.virtualNames()}
	b.results = append(b.results, r)
	h, t, err := b.converge(ctx, r, "virtual", b.waitSynced(r))
	if err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: %w", err)
	}
	if err := b.noopResync(ctx, r, h); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: no-op resync: %w", err)
	}
	if err := b.aggregation(ctx, r, h, t); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: aggregation: %w", err)
	}
	if err := b.quietFleet(ctx, r, h); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: quiet fleet: %w", err)
	}
	if err := b.busyFleet(ctx, r, h); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: busy fleet: %w", err)
	}
	if err := b.cliStatus(ctx, r); err != nil {
		_, _, _ = h.stop()
		return fmt.Errorf("virtual: %w", err)
	}
	if err := b.finish(ctx, r, h); err != nil {
		return err
	}
	// The dark scenario converges as this one did: without summaries.
	return inParallel(16, len(r.clusterNames), func(i int) error {
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: r.clusterNames[i], Name: policyhubv1.SummaryName}}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.clusterNames[i], Name: policyhubv1.AgentLeaseName}}
		return errors.Join(client.IgnoreNotFound(b.hub.Delete(ctx, s)), client.IgnoreNotFound(b.hub.Delete(ctx, lease)))
	})
}

// noopResync touches an annotation of every FleetPolicy (a reconcile with nothing to change, as
// the resync timer starts) and measures until the hub is quiet again: the FleetPolicy
// controller has counted a reconcile per FleetPolicy (controller_runtime_reconcile_total) and the
// hub's CPU stays under 0.1 core for 3 s.
func (b *bench) noopResync(ctx context.Context, r *result, h *hubProc) error {
	logf("%s: no-op resync of %d FleetPolicies...", r.name, len(r.fps))
	reconciles := func() (float64, bool) {
		m, err := h.scrape(ctx, "controller_runtime_reconcile_total")
		if err != nil {
			return 0, false
		}
		return m.sum("controller_runtime_reconcile_total", map[string]string{"controller": "fleetpolicy"})
	}
	startRecon, reconOK := reconciles()
	startReq, err := b.managedRequests(ctx)
	if err != nil {
		return err
	}
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	defer b.profileCPU(ctx, h, 30*time.Second, r.name+"-noop-cpu.pb.gz")()
	err = inParallel(8, len(r.fps), func(i int) error {
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bench/resync":"%d"}}}`, start.UnixNano())))
		return b.hub.Patch(ctx, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.fps[i]}}, patch)
	})
	if err != nil {
		return err
	}
	deadline := start.Add(b.o.timeout)
	for reconOK {
		n, _ := reconciles()
		if n-startRecon >= float64(len(r.fps)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	at, snap, settled, _ := b.settle(h, time.Until(deadline))
	r.noop.ran, r.noop.settled = true, settled
	r.noop.took = at.Sub(start)
	r.noop.cpu = cpuBetween(before, snap)
	r.noop.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	if n, ok := reconciles(); ok && reconOK {
		r.noop.reconciles, r.noop.reconOK = n-startRecon, true
	}
	endReq, err := b.managedRequests(ctx)
	if err != nil {
		return err
	}
	r.noop.requests = endReq - startReq
	logf("%s: no-op resync settled %v after %s: hub %.1f CPU-s, %.0f reconciles, %.0f requests to the clusters", r.name, settled, r.noop.took.Round(10*time.Millisecond), r.noop.cpu[partHub], r.noop.reconciles, r.noop.requests)
	return nil
}
