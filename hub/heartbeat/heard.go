package heartbeat

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Heard is when the hub last heard each cluster's agent, by the hub's clock. It holds one time
// per agent Lease the hub watches (one per cluster namespace at most), and forgets a cluster
// when its Lease is deleted. Safe for concurrent use.
type Heard struct {
	now func() time.Time

	mu sync.RWMutex
	at map[string]time.Time
}

// New returns an empty record; now is the hub's clock (nil: time.Now).
func New(now func() time.Time) *Heard {
	if now == nil {
		now = time.Now
	}
	return &Heard{now: now, at: map[string]time.Time{}}
}

// At is when the hub last heard cluster's agent renew its Lease (zero: not heard). A nil Heard
// has heard nothing.
func (h *Heard) At(cluster string) time.Time {
	if h == nil {
		return time.Time{}
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.at[cluster]
}

// Renewed records that the hub saw the cluster's Lease change just now.
func (h *Heard) Renewed(cluster string) {
	h.set(cluster, h.now())
}

// Found records a Lease the hub had not seen change, e.g. when it (re)starts and lists them:
// the agent's renewTime stands in, never later than now, since it is the cluster's clock. A
// clock behind the hub's only makes the agent look older until its next renewal; one ahead
// cannot make it look fresher than now.
func (h *Heard) Found(cluster string, renewTime time.Time) {
	if now := h.now(); renewTime.After(now) {
		renewTime = now
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if renewTime.After(h.at[cluster]) {
		h.at[cluster] = renewTime
	}
}

func (h *Heard) set(cluster string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at[cluster] = at
}

// Forget drops what was heard of the cluster (its Lease was deleted).
func (h *Heard) Forget(cluster string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.at, cluster)
}

// Handler records the agents' Leases as their events arrive and enqueues, for each, the
// cluster's summary (SummaryName in the Lease's namespace), whose reconciler decides whether the
// cluster's liveness changed. Only a Lease named AgentLeaseName counts (the hub's cache should
// hold no other). An update that does not change the Lease (an informer resync) is not a renewal.
func (h *Heard) Handler() handler.EventHandler {
	summary := func(lease client.Object) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: lease.GetNamespace(), Name: policyhubv1.SummaryName}}
	}
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			lease, ok := e.Object.(*coordinationv1.Lease)
			if !ok || lease.Name != policyhubv1.AgentLeaseName {
				return
			}
			// A creation the hub watched or one it found listing: the agent's own time stands
			// in, clamped (see Found); the next renewal is timed by the hub.
			if t := lease.Spec.RenewTime; t != nil {
				h.Found(lease.Namespace, t.Time)
			}
			q.Add(summary(lease))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectNew.GetName() != policyhubv1.AgentLeaseName || e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
				return
			}
			h.Renewed(e.ObjectNew.GetNamespace())
			q.Add(summary(e.ObjectNew))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			if e.Object.GetName() != policyhubv1.AgentLeaseName {
				return
			}
			h.Forget(e.Object.GetNamespace())
			q.Add(summary(e.Object))
		},
	}
}
