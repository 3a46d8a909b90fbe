package collect

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/policyhub/policyhub/agent/engine"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// engineWatch is what the collector watches of the cluster's engine: Kyverno's controllers'
// Deployments in Kyverno's namespace (its version and settings), the Kyverno policy APIs served,
// and the metadata of every legacy object (the inventory). Fields are guarded by Collector.mu.
type engineWatch struct {
	deployments cache.SharedIndexInformer
	policyAPIs  []string
	// legacy holds, per legacy kind the cluster serves, the reflector filling its store.
	legacy map[string]*legacyWatch
}

type legacyWatch struct {
	gvr   schema.GroupVersionResource
	store *engine.LegacyStore
	stop  context.CancelFunc
}

// deploymentItem is what the Deployments informer stores of a Deployment.
type deploymentItem struct {
	metav1.ObjectMeta
	deployment engine.Deployment
	ok         bool
}

func (i *deploymentItem) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (i *deploymentItem) DeepCopyObject() runtime.Object {
	out := *i
	i.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// discoverEngine starts the engine's watches that are not running yet and follows the served
// versions of the legacy kinds; it says whether the served policy APIs changed. c.mu is not held.
func (c *Collector) discoverEngine(ctx context.Context) (changed bool, err error) {
	groups, err := c.discovery.ServerGroups()
	if err != nil {
		return false, fmt.Errorf("discover the policy APIs: %w", err)
	}
	apis := engine.PolicyAPIs(groups)
	// The version each legacy kind is read at: the group's preferred one among those serving it
	// (PolicyException is kyverno.io/v2 or v2beta1, by Kyverno version).
	mappings := map[string]schema.GroupVersionResource{}
	for _, kind := range policyhubv1.LegacyKinds {
		m, err := c.mapper.RESTMapping(schema.GroupKind{Group: "kyverno.io", Kind: kind})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("discover the served version of kyverno.io %s: %w", kind, err)
		}
		mappings[kind] = m.Resource
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.engine
	if e.deployments == nil {
		e.deployments = c.watchKyvernoDeployments(ctx)
	}
	if e.legacy == nil {
		e.legacy = map[string]*legacyWatch{}
	}
	for kind, w := range e.legacy {
		if gvr, served := mappings[kind]; !served || gvr != w.gvr {
			w.stop()
			delete(e.legacy, kind)
			changed = true
		}
	}
	for kind, gvr := range mappings {
		if _, started := e.legacy[kind]; !started {
			e.legacy[kind] = c.watchLegacy(ctx, kind, gvr)
		}
	}
	if !slices.Equal(apis, e.policyAPIs) {
		e.policyAPIs = apis
		changed = true
	}
	return changed, nil
}

// watchKyvernoDeployments starts an informer on the Deployments of Kyverno's admission and
// reports controllers, in Kyverno's namespace only, keeping of each only what engine.Facts reads.
func (c *Collector) watchKyvernoDeployments(ctx context.Context) cache.SharedIndexInformer {
	ns := c.opts.KyvernoNamespace
	return c.newInformer(ctx, c.clientset, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = engine.DeploymentSelector
			return c.clientset.AppsV1().Deployments(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = engine.DeploymentSelector
			return c.clientset.AppsV1().Deployments(ns).Watch(ctx, o)
		},
	}, &appsv1.Deployment{}, func(obj any) (any, error) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return obj, nil
		}
		kept, ok := engine.FromDeployment(d)
		return &deploymentItem{ObjectMeta: slim(d.ObjectMeta), deployment: kept, ok: ok}, nil
	})
}

// watchLegacy starts a reflector listing and watching the metadata of kind's objects into a
// bounded store (engine.LegacyStore): never the objects themselves.
func (c *Collector) watchLegacy(ctx context.Context, kind string, gvr schema.GroupVersionResource) *legacyWatch {
	ctx, stop := context.WithCancel(ctx)
	store := engine.NewLegacyStore(kind, 0, c.signal)
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(c.metadataListWatch(gvr, ""), c.metadata),
		&metav1.PartialObjectMetadata{}, store, cache.ReflectorOptions{Name: "legacy " + gvr.String()})
	go r.RunWithContext(ctx)
	return &legacyWatch{gvr: gvr, store: store, stop: stop}
}

// engineSynced says whether the engine's watches have all read the cluster once. c.mu is held.
func (c *Collector) engineSynced() bool {
	e := &c.engine
	if e.deployments == nil || !e.deployments.HasSynced() {
		return false
	}
	for _, w := range e.legacy {
		if !w.store.Synced() {
			return false
		}
	}
	return true
}

// engineSnapshot fills info with the engine's facts now. c.mu is held.
func (c *Collector) engineSnapshot(info *policyhubv1.EngineInfo) {
	e := &c.engine
	info.PolicyAPIs = slices.Clone(e.policyAPIs)
	if e.deployments != nil {
		byComponent := map[string]*engine.Deployment{}
		for _, obj := range e.deployments.GetStore().List() {
			it, ok := obj.(*deploymentItem)
			if !ok || !it.ok {
				continue
			}
			// Several releases in one namespace: the first by name, so the answer is stable.
			if prev := byComponent[it.deployment.Component]; prev == nil || strings.Compare(it.deployment.Name, prev.Name) < 0 {
				byComponent[it.deployment.Component] = &it.deployment
			}
		}
		info.Kyverno = engine.Facts(byComponent[engine.ComponentAdmission], byComponent[engine.ComponentReports])
	}
	if !c.discovered {
		return
	}
	kinds := make([]engine.LegacyKind, 0, len(e.legacy))
	for _, w := range e.legacy {
		if !w.store.Synced() {
			return // not read yet: absent, not zero
		}
		kinds = append(kinds, w.store.Snapshot())
	}
	info.Legacy = engine.Inventory(kinds)
}
