package engine

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/policyhub/policyhub/hub/render"
)

// ResultEvents carries the clusters' workers' published results to the reconcilers of the
// declarations they belong to: a result wakes its declaration, which writes its status. Waking
// is an Add to the controller's work queue: it never blocks a worker, and a declaration woken by
// many clusters at once is reconciled once. The zero value is ready to use.
type ResultEvents struct {
	mu     sync.Mutex
	queues map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Published is work.WorkersOptions.Published: it wakes the declarations of sources.
func (r *ResultEvents) Published(_ string, sources []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range sources {
		owner, ok := render.ParseSource(s)
		if !ok {
			continue
		}
		if q := r.queues[owner.Kind]; q != nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name}})
		}
	}
}

// For is the controller source of the declarations of kind.
func (r *ResultEvents) For(kind string) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.queues == nil {
			r.queues = map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{}
		}
		r.queues[kind] = q
		return nil
	})
}

// Wake enqueues the objects of kind named by keys, in the controller registered with For(kind)
// (none yet: nothing to wake).
func (r *ResultEvents) Wake(kind string, keys ...types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues[kind]; q != nil {
		for _, k := range keys {
			q.Add(reconcile.Request{NamespacedName: k})
		}
	}
}
