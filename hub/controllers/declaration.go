package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/statusslice"
	"github.com/policyhub/policyhub/hub/work"
)

// Declaration is what the hub syncs into clusters, a FleetPolicy or an ApplicationPolicy: the
// engine below runs the same lifecycle for both, and each kind says what differs.
type Declaration interface {
	// Object is the API Object, for the clients and the Event recorder.
	Object() client.Object
	// Kind is the declaration's Kind (FleetPolicy, ApplicationPolicy).
	Kind() string
	// CommonStatus points at the CommonStatus fields every declaration has.
	CommonStatus() StatusFields
	// StatusWithoutChurn is the status without what moves with every agent's summary (pass,
	// warn and skip counts: policyhubv1.ResultCounts.WithoutChurn), to tell whether it changed
	// enough to be written.
	StatusWithoutChurn() any
	Source(hubID string) string
	Suspended() bool
	Prune() bool
	// Render places the declaration and renders what each placed cluster gets (the engine
	// fills in the rendering's input, epoch and token).
	Render(ctx context.Context) (*Rendering, error)
	// RenderInput is what render reads from the declaration besides its spec and annotations
	// (e.g. a FleetPolicy's rollout state): a rendering is reused while it is the same.
	RenderInput() string
	// SetResults sets the agents' results in the state of the clusters this replica works, from
	// their accepted summaries, and in the status from every cluster's state (read.unread: kept
	// as it was, e.g. as another replica wrote it).
	SetResults(clusters []policyhubv1.ClusterStatus, read SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus
	// Progress moves what the declaration rolls out (made by the rendering r), from the
	// clusters' outcomes and state (their results, and whether their reports are fresh).
	Progress(r *Rendering, outcomes []Outcome, clusters []policyhubv1.ClusterStatus, now time.Time) Progress
	// AfterStatus runs once the status is written (e.g. mirroring it elsewhere) and may ask to
	// be woken again.
	AfterStatus(ctx context.Context) time.Duration
	Copy() Declaration
}

// Progress is what a declaration's rollout says after a step.
type Progress struct {
	// Holding says why the declaration is not Ready though its clusters hold what they should
	// now ("" when nothing holds it); Reason is the condition Reason for it.
	Holding, Reason string
	// Stalled says that only a change of the declaration can end the holding: Stalled, rather
	// than Reconciling.
	Stalled bool
	// Wake is when to reconcile again without an event (zero: no need).
	Wake time.Duration
}

// StatusFields points into a declaration's status.
type StatusFields struct {
	ObservedGeneration *int64
	Conditions         *[]metav1.Condition
	Summary            *policyhubv1.StatusSummary
}

// DeclarationOptions are what the reconcilers of both declaration kinds (FleetPolicy,
// ApplicationPolicy) need: how they reach the hub and the clusters, and how often and how widely
// they sync.
type DeclarationOptions struct {
	// Client reads and writes the hub (the declarations and their status).
	Client client.Client
	// Reader reads the inventory (gateway Secrets' metadata, OCM objects) and the agents'
	// summaries; the manager's cached client serves them from watches.
	Reader client.Reader
	// Gateway reaches cluster-gateway: the hub's config (aggregation layer) or the gateway's URL.
	Gateway *rest.Config
	// SecretNamespace is the gateway's credential-secret namespace.
	SecretNamespace string
	HubID           string
	// Workers own the clusters: a reconcile hands them what the declaration wants and reads
	// their latest results, never waiting for a cluster.
	Workers *work.Workers
	// Results wakes the declarations whose results the workers published.
	Results  *ResultEvents
	Recorder events.EventRecorder
	// StatusCoalesce is how long a declaration's status waits, after a change, for its clusters'
	// results from the first cluster's answer, so that it is written once for all rather than
	// once per cluster; a cluster slower than that is shown Pending meanwhile. Before any cluster
	// has answered it waits up to 5 times as long. Zero means 2s.
	StatusCoalesce time.Duration
	// MaxConcurrentReconciles bounds the declarations of the kind reconciled at once.
	MaxConcurrentReconciles int
	// OCMPlacements is true when the hub serves OCM's Placement API: declarations with a
	// placementRef then follow its Placement and PlacementDecisions as they change.
	OCMPlacements bool
	// Heard is when each cluster's agent last renewed its Lease, by the hub's clock: an agent
	// heard well after a version arrived, with nothing new to say, has reported it (freshReport).
	// Nil: only summaries count.
	Heard *heartbeat.Heard
	// Namespace is the hub's own: FleetPolicies' ClusterStatusSlices live there (an
	// ApplicationPolicy's live in its namespace).
	Namespace string
	// ClustersPerSlice is how many clusters one ClusterStatusSlice holds; zero means
	// policyhubv1.MaxClustersPerSlice.
	ClustersPerSlice int
	// Renders counts the declarations rendered (nil: not counted).
	Renders *metrics.Renders
	// Shard is this replica's share of the fleet when the hub's replicas share it (nil: this
	// replica works every cluster and writes every status).
	Shard *shard.Sharder
	// SummaryMetas reads every summary's metadata when the replicas share the fleet (see
	// NewSummaryMetas): Reader holds only the summaries of this replica's clusters.
	SummaryMetas client.Reader
}

// statusQuiet is how many StatusCoalesce a status waits for its first cluster's answer.
const statusQuiet = 5

// Engine returns the Engine that reconciles declarations with these options; room is the
// reconciler's memory of its declarations between reconciles.
func (o *DeclarationOptions) Engine(room *Room) Engine {
	coalesce := o.StatusCoalesce
	if coalesce <= 0 {
		coalesce = 2 * time.Second
	}
	return Engine{
		client: o.Client, reader: o.Reader, recorder: o.Recorder, hubID: o.HubID, coalesce: coalesce, quiet: statusQuiet * coalesce, room: room, renders: o.Renders,
		secretNamespace: o.SecretNamespace, heard: o.Heard, namespace: o.Namespace, sliceSize: o.ClustersPerSlice, shard: o.Shard,
		summaryMetas: o.SummaryMetas,
		dispatch:     dispatcher{gateway: o.Gateway, workers: o.Workers},
	}
}

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

// ReadOnlyList lists the cache's own objects instead of deep copies, for reads that only look
// (event maps, lookups): every summary or inventory event would otherwise copy every
// declaration. Objects listed with it must never be changed.
const ReadOnlyList = client.UnsafeDisableDeepCopyOption(true)

// Engine runs a declaration's lifecycle: finalizer and suspend here; then the flow in two halves,
// the dispatch half towards the clusters (placement and rendering, sync of every selected
// cluster, pruning those no longer selected: dispatchHalf) and the status half back from them
// (the workers' outcomes and the agents' results → per-cluster state, status, Events:
// statusHalf), which meet in the results room.
type Engine struct {
	client   client.Client
	reader   client.Reader
	recorder events.EventRecorder
	dispatch dispatcher
	hubID    string
	// secretNamespace holds cluster-gateway's credential Secrets: a cluster without one has left.
	secretNamespace string
	coalesce        time.Duration
	// quiet bounds how long a status waits for the first cluster to answer (see statusWait).
	quiet time.Duration
	room  *Room
	heard *heartbeat.Heard
	// renders counts the renderings the dispatch half makes (nil: not counted).
	renders *metrics.Renders
	// namespace holds FleetPolicies' ClusterStatusSlices; sliceSize is the clusters per slice.
	namespace string
	sliceSize int
	// shard is this replica's share of the fleet (nil: all of it; see share).
	shard *shard.Sharder
	// summaryMetas reads every summary's metadata (nil with one replica).
	summaryMetas client.Reader
}

// sliceReread is how long a reconcile that found its cached slices behind waits to read them again.
const sliceReread = 200 * time.Millisecond

// sliceOwner names the declaration's ClusterStatusSlices.
func (e Engine) sliceOwner(d Declaration) statusslice.Owner {
	obj := d.Object()
	ns := obj.GetNamespace()
	if ns == "" {
		ns = e.namespace
	}
	return statusslice.Owner{Kind: d.Kind(), Name: obj.GetName(), UID: string(obj.GetUID()), Namespace: ns}
}

// writeSlices makes the declaration's ClusterStatusSlices hold clusters, writing only the slices
// that change.
func (e Engine) writeSlices(ctx context.Context, d Declaration, clusters []policyhubv1.ClusterStatus, have []policyhubv1.ClusterStatusSlice) error {
	changes := statusslice.Split(e.sliceOwner(d), clusters, have, e.sliceSize)
	return statusslice.Apply(ctx, e.client, d.Object(), policyhubv1.GroupVersion.WithKind(d.Kind()), changes)
}

// sliceWriteFailed is a reconcile's answer to a failed writeSlices: a write refused because the
// cache had not seen the last write of a slice yet (this replica's, or another replica's entries)
// reads the slices again shortly; any other error is returned.
func sliceWriteFailed(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: sliceReread}, nil
	}
	return ctrl.Result{}, err
}

// Reconcile keeps the finalizer, or lets a deleted declaration go (finalize); a suspended one
// only says so. Otherwise the dispatch half hands the clusters what the declaration wants, and
// the status half writes what they answered.
func (e Engine) Reconcile(ctx context.Context, key types.NamespacedName, d Declaration) (ctrl.Result, error) {
	if e.shareOf(d).idle {
		return ctrl.Result{}, nil // no share of the fleet yet: its first one wakes every declaration
	}
	source := d.Source(e.hubID)
	obj := d.Object()
	deleting := !obj.GetDeletionTimestamp().IsZero()
	lifecycle, why := declare.LifecycleOf(deleting, d.Suspended(), d.Prune())
	if deleting {
		return e.finalize(ctx, key, d, source) // prunes, or keeps, as lifecycle says
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		patch := client.MergeFrom(d.Copy().Object())
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := e.client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := d.Copy()
	st := d.CommonStatus()
	if lifecycle == declare.Keep {
		// Nothing is synced or pruned; the status says so, keeping the clusters' last state.
		ready := metav1.ConditionTrue
		if c := meta.FindStatusCondition(*st.Conditions, policyhubv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			ready = c.Status
		}
		*st.ObservedGeneration = obj.GetGeneration()
		setConditions(st.Conditions, metav1.Condition{
			Type: policyhubv1.ConditionReady, Status: ready, Reason: "Suspended", ObservedGeneration: obj.GetGeneration(),
			Message: why,
		}, nil, nil)
		return ctrl.Result{}, e.patchStatus(ctx, orig, d)
	}

	owner := e.sliceOwner(d)
	before, have, err := statusslice.Read(ctx, e.reader, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	sent, err := e.dispatchHalf(ctx, key, d, before)
	if invalid, ok := render.AsInvalid(err); ok {
		return e.stalled(ctx, d, orig, invalid.Reason, invalid.Err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return e.statusHalf(ctx, key, d, orig, sent, before, have)
}

// keepOutcomes drops the clusters a declaration left and was pruned from, and says whether a
// cluster is failing (its worker retries it) and how many have no result yet.
func keepOutcomes(outcomes []Outcome, targets *render.Targets) (kept []Outcome, failing bool, pending int) {
	for _, o := range outcomes {
		leaving := targets.Objects[o.Cluster] == nil
		if leaving && !o.Pending && o.Result.Phase == policyhubv1.ClusterPhaseSynced {
			continue // pruned: no longer part of this declaration
		}
		if leaving {
			o.Result.Message = "no longer selected; pruning: " + o.Result.Message
		}
		kept = append(kept, o)
		switch {
		case o.Pending:
			pending++
		case retrying(o.Result.Phase, o.Result.Message):
			failing = true
		}
	}
	return kept, failing, pending
}

// retrying says whether a cluster's worker retries the declaration there with backoff: it
// failed or was locked out; a refusal for the tenant's budget is not retried (it is Stalled).
func retrying(phase policyhubv1.ClusterPhase, message string) bool {
	switch phase {
	case policyhubv1.ClusterPhaseFailed:
		return !work.OverBudget(true, message)
	case policyhubv1.ClusterPhaseLockHeld:
		return true
	}
	return false
}

// stalled records a declaration that cannot be dispatched until the user changes it; nothing
// is sent to any cluster.
func (e Engine) stalled(ctx context.Context, d, orig Declaration, reason string, cause error) (ctrl.Result, error) {
	msg := policyhubv1.TruncateMessage(cause.Error(), 1024)
	obj := d.Object()
	st := d.CommonStatus()
	*st.ObservedGeneration = obj.GetGeneration()

	setConditions(st.Conditions,
		metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()},
		nil, &metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	if err := e.patchStatus(ctx, orig, d); err != nil {
		return ctrl.Result{}, err
	}
	if meta.FindStatusCondition(*orig.CommonStatus().Conditions, policyhubv1.ConditionStalled) == nil {
		e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "nothing was dispatched: %s", msg)
	}
	// Retrying cannot help: the next spec change triggers a reconcile.
	return ctrl.Result{}, nil
}

// patchStatus writes the status when it changed (a no-op resync writes nothing). A change of
// the pass, warn or skip totals alone is not written (policyhubv1.ResultCounts.WithoutChurn):
// they move with every agent's summary, and are taken along when anything else changes.
func (e Engine) patchStatus(ctx context.Context, orig, d Declaration) error {
	if equality.Semantic.DeepEqual(orig.StatusWithoutChurn(), d.StatusWithoutChurn()) {
		return nil
	}
	if err := e.client.Status().Patch(ctx, d.Object(), client.MergeFrom(orig.Object())); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

func MinPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// ControllerFor starts a controller for a declaration kind with what every kind watches
// besides itself: spec and annotation changes (a requested reconcile), the inventory (clusters
// joining, leaving or changing labels: cluster-gateway's credential Secrets, metadata only), the
// agents' summaries of the clusters it is in, and the results the clusters' workers publish for
// it. Nothing is retried here: the workers retry their clusters and publish what they find.
//
// What a rendering is made from besides the declaration (the inventory, OCM placements) marks its
// rendering for renewal in room as it maps (resultsRoom.rerendering); summaries and results do not.
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
