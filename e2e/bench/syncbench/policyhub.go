package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/work"
)

// policyhub runs policyhub's hub controller in this process, a manager like the hub binary's,
// and measures its sync of every FleetPolicy and then a resync with nothing changed.
func (b *bench) policyhub(ctx context.Context, prefix string) (cost, cost, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyhubv1.AddToScheme(scheme))
	utilruntime.Must(placement.AddToScheme(scheme))
	hubCfg := rest.CopyConfig(b.f.Hub.Config)
	hubCfg.QPS, hubCfg.Burst = -1, 0
	mgr, err := ctrl.NewManager(hubCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      controllers.CacheOptions(b.f.SecretNamespace, b.f.SecretNamespace, ""), Client: controllers.ClientOptions(),
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	registry := prometheus.NewRegistry()
	workers, err := controllers.SetupHub(ctx, mgr, controllers.HubOptions{
		Gateway: hubCfg, SecretNamespace: b.f.SecretNamespace, HubID: hubID, Namespace: b.f.SecretNamespace,
		Lock: work.LockOptions{Identity: hubID + "/bench"}, Registry: registry, Resync: time.Hour,
		MaxConcurrentReconciles: 8,
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	defer workers.Close() // its watch caches would weigh on the next round
	mgrCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = mgr.Start(mgrCtx) }()
	// The manager's cached client: reading FleetPolicies back costs the hub nothing.
	hub := mgr.GetClient()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return cost{}, cost{}, fmt.Errorf("hub cache did not sync")
	}

	// A hub runs before policies are declared: let it see the clusters first (one FleetPolicy
	// synced everywhere, then deleted), so the clock measures syncing, not the hub's start.
	warmup, err := fleetPolicy("warmup", -1)
	if err != nil {
		return cost{}, cost{}, err
	}
	if err := hub.Create(ctx, warmup); err != nil {
		return cost{}, cost{}, err
	}
	if err := b.waitSynced(ctx, mgr.GetCache(), []string{"warmup"}); err != nil {
		return cost{}, cost{}, err
	}
	if err := hub.Delete(ctx, warmup); err != nil {
		return cost{}, cost{}, err
	}
	if err := b.waitGone(ctx, hub, "warmup"); err != nil {
		return cost{}, cost{}, err
	}

	var names []string
	for i := range b.o.policies {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	apply, err := b.measure(prefix, func() error {
		// The FleetPolicies are created as fast as the loops send (-parallel at a time); the clock
		// runs from the first creation to the last cluster synced.
		err := inParallel(b.o.parallel, len(names), func(i int) error {
			fp, err := fleetPolicy(names[i], i)
			if err != nil {
				return err
			}
			return hub.Create(ctx, fp)
		})
		if err != nil {
			return err
		}
		return b.waitSynced(ctx, mgr.GetCache(), names)
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	// A resync of every FleetPolicy with nothing changed: touch an annotation (it triggers a
	// reconcile, as the resync timer would) and wait until each reconcile has run.
	noop, err := b.measure(prefix, func() error {
		start := unchangedCount(registry)
		for _, name := range names {
			fp := &policyhubv1.FleetPolicy{}
			if err := hub.Get(ctx, client.ObjectKey{Name: name}, fp); err != nil {
				return err
			}
			patch := client.MergeFrom(fp.DeepCopy())
			fp.SetAnnotations(map[string]string{"bench/resync": "1"})
			if err := hub.Patch(ctx, fp, patch); err != nil {
				return err
			}
		}
		return b.waitUnchanged(registry, start+float64(len(names)*b.o.clusters))
	})
	if err != nil {
		return cost{}, cost{}, err
	}
	// Leave the hub as the round found it: a next round's hub would otherwise resync these too.
	for _, name := range names {
		if err := hub.Delete(ctx, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return cost{}, cost{}, err
		}
	}
	for _, name := range names {
		if err := b.waitGone(ctx, hub, name); err != nil {
			return cost{}, cost{}, err
		}
	}
	return apply, noop, nil
}

// waitSynced waits until every FleetPolicy named is Synced in every cluster. It is told by the
// hub cache's informer rather than polling the cache, so the clock stops as the last status
// arrives, not up to a polling interval later (the loops' clocks stop as their last write returns).
func (b *bench) waitSynced(ctx context.Context, informers cache.Informers, names []string) error {
	informer, err := informers.GetInformer(ctx, &policyhubv1.ClusterStatusSlice{})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true // not another round's, nor the warmup's
	}
	var mu sync.Mutex
	synced := map[string]bool{}
	all := make(chan struct{})
	check := func(obj any) {
		// A FleetPolicy's clusters (a few here) are in one ClusterStatusSlice.
		slice, ok := obj.(*policyhubv1.ClusterStatusSlice)
		if !ok || slice.Declaration.Kind != policyhubv1.KindFleetPolicy || !want[slice.Declaration.Name] {
			return
		}
		n := 0
		for _, c := range slice.Clusters {
			if c.Phase == policyhubv1.ClusterPhaseSynced {
				n++
			}
		}
		if n != b.o.clusters {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !synced[slice.Declaration.Name] {
			synced[slice.Declaration.Name] = true
			if len(synced) == len(want) {
				close(all)
			}
		}
	}
	registration, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = informer.RemoveEventHandler(registration) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Minute):
		return fmt.Errorf("not converged within 30 minutes")
	}
}

// waitGone polls until the FleetPolicy is deleted (its finalizer pruned the clusters).
func (b *bench) waitGone(ctx context.Context, hub client.Client, name string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, &policyhubv1.FleetPolicy{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("FleetPolicy %s not deleted within 5 minutes", name)
}

// unchangedCount is the hub's count of objects a sync found unchanged, over all clusters.
func unchangedCount(registry *prometheus.Registry) float64 {
	families, _ := registry.Gather()
	total := 0.0
	for _, f := range families {
		if f.GetName() == "policyhub_sync_operations_total" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "action" && l.GetValue() == "unchanged" {
						total += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return total
}

// waitUnchanged polls the hub's metrics until its unchanged count reaches n.
func (b *bench) waitUnchanged(registry *prometheus.Registry, n float64) error {
	deadline := time.Now().Add(30 * time.Minute)
	for unchangedCount(registry) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("no-op resync did not finish: %v of %v", unchangedCount(registry), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
