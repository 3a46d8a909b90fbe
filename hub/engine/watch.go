package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/gateway"
)

// RequestsFor are the reconcile requests of the items keep passes (every item when keep is nil):
// what the event maps of every declaration kind return.
func RequestsFor[T any, P interface {
	*T
	client.Object
}](items []T, keep func(P) bool) []reconcile.Request {
	var reqs []reconcile.Request
	for i := range items {
		if obj := P(&items[i]); keep == nil || keep(obj) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return reqs
}

// ControllerFor starts a controller for a declaration kind with what every kind watches
// besides itself: spec and annotation changes (a requested reconcile), the inventory (clusters
// joining, leaving or changing labels: cluster-gateway's credential Secrets, metadata only), the
// agents' summaries of the clusters it is in, and the results the clusters' workers publish for
// it. Nothing is retried here: the workers retry their clusters and publish what they find.
//
// What a rendering is made from besides the declaration (the inventory, OCM placements) marks its
// rendering for renewal in room as it maps (Room.Rerendering); summaries and results do not.
//
// A kind without a placement of its own passes no ofPlacement; also passes more of the
// declaration's own updates (e.g. an approval in its status).
func ControllerFor(mgr ctrl.Manager, name, kind string, obj client.Object, o *DeclarationOptions, room *Room, every, inCluster, ofPlacement handler.MapFunc, also ...predicate.Predicate) *builder.TypedBuilder[reconcile.Request] {
	every = room.Rerendering(every)
	credentials := predicate.NewPredicateFuncs(func(c client.Object) bool {
		_, ok := c.GetLabels()[gateway.CredentialTypeLabel]
		return ok && c.GetNamespace() == o.SecretNamespace
	})
	b := ctrl.NewControllerManagedBy(mgr)
	if o.OCMPlacements && ofPlacement != nil {
		ofPlacement = room.Rerendering(ofPlacement)
		// Where a placementRef places follows its PlacementDecisions, and a Placement created or
		// deleted ends or starts PlacementNotFound.
		b = b.Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(ofPlacement)).
			Watches(&clusterv1beta1.Placement{}, handler.EnqueueRequestsFromMapFunc(ofPlacement), builder.OnlyMetadata, builder.WithPredicates(CreateOrDelete()))
	}
	if o.Shard != nil {
		// What its writer writes in its status (a rollout's state, a set's kept version, an
		// exception's approval) is what the other replicas render from.
		also = append(also, predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !o.Writes(kind, e.ObjectNew) }})
		// Another replica's entries in a declaration's slices wake it: its writer counts them.
		namespaced, err := mgr.GetClient().IsObjectNamespaced(obj)
		if err != nil {
			namespaced = obj.GetNamespace() != ""
		}
		b = b.Watches(&policyhubv1.ClusterStatusSlice{}, handler.EnqueueRequestsFromMapFunc(ofSlice(kind, namespaced)))
	}
	return b.
		For(obj, builder.WithPredicates(predicate.Or(append([]predicate.Predicate{predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}}, also...)...))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(every),
			builder.OnlyMetadata, builder.WithPredicates(credentials, predicate.Or(predicate.LabelChangedPredicate{}, CreateOrDelete()))).
		Watches(&policyhubv1.PolicyReportSummary{}, enqueueAfter(inCluster, summaryCoalesce), builder.WithPredicates(summaryChanged())).
		WatchesRawSource(o.Results.For(kind)).
		Named(name).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(o.MaxConcurrentReconciles, 1)})
}

// summaryChanged passes the summary events a declaration's status depends on: its spec (the
// results), when the hub saw it (status.observedTime: results count for a rollout only once the
// hub has seen them), and the verdict on the agent's liveness (Ready turning Stale or back; see
// aggregate.JudgedStale). The first two come within moments of each push, and coalesce
// (summaryCoalesce); the verdict changes only when an agent falls silent or comes back, never
// with a Lease renewal, so a quiet fleet wakes no declaration.
func summaryChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*policyhubv1.PolicyReportSummary)
		updated, okNew := e.ObjectNew.(*policyhubv1.PolicyReportSummary)
		if !okOld || !okNew {
			return true
		}
		return old.Generation != updated.Generation || !old.Status.ObservedTime.Equal(updated.Status.ObservedTime) ||
			aggregate.JudgedStale(old) != aggregate.JudgedStale(updated)
	}}
}

// summaryCoalesce is how long a declaration waits after an agent's summary before it takes the
// new results in: a thousand agents push about a hundred summaries a second, and each declaration
// placed on all their clusters then rewrites the slices of the clusters that reported (and its
// status, when a count moved) once for the summaries of that while, not once per summary.
const summaryCoalesce = 500 * time.Millisecond

// enqueueAfter enqueues what mapFn maps an event's object to, after delay. An object already
// waiting is not pushed back, so the wait is bounded by delay.
func enqueueAfter(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	add := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range mapFn(ctx, obj) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
	}
}

// CreateOrDelete passes creations and deletions (a cluster joined or left).
func CreateOrDelete() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

// ofSlice maps a ClusterStatusSlice to its declaration of kind (cluster-scoped kinds have no
// namespace in their requests): when the replicas share the fleet, another replica's entries
// wake the declaration's writer.
func ofSlice(kind string, namespaced bool) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		s, ok := obj.(*policyhubv1.ClusterStatusSlice)
		if !ok || s.Declaration.Kind != kind {
			return nil
		}
		key := types.NamespacedName{Name: s.Declaration.Name}
		if namespaced {
			key.Namespace = s.Namespace
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
}
