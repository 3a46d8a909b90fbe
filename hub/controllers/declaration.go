package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

// errRetry makes controller-runtime retry with its per-object exponential backoff.
var errRetry = errors.New("some clusters are not synced yet")

// declaration is what the hub syncs into clusters, a FleetPolicy or an ApplicationPolicy: the
// engine below runs the same lifecycle for both, and each kind says what differs.
type declaration interface {
	// object is the API object, for the clients and the Event recorder.
	object() client.Object
	// status points at the status fields every declaration has.
	status() declarationStatus
	// statusValue is the whole status, to tell whether it changed.
	statusValue() any
	source(hubID string) string
	suspended() bool
	prune() bool
	// targets places and renders the declaration.
	targets(ctx context.Context) (*render.Targets, error)
	// setResults sets the agents' results in the status from the accepted summaries and says
	// when the first fresh results turn stale.
	setResults(summaries map[string]*policyhubv1.PolicyReportSummarySpec, owned map[string][]aggregate.Policy, now time.Time) time.Time
	// afterStatus runs once the status is written (e.g. mirroring it elsewhere) and may ask to
	// be woken again.
	afterStatus(ctx context.Context) time.Duration
	deepCopy() declaration
}

// declarationStatus points into a declaration's status.
type declarationStatus struct {
	observedGeneration *int64
	conditions         *[]metav1.Condition
	clusters           *[]policyhubv1.ClusterStatus
	summary            *policyhubv1.StatusSummary
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
	// Batcher syncs the clusters, batching the declarations of concurrent reconciles per cluster.
	Batcher  *work.Batcher
	Recorder events.EventRecorder
	// ResyncInterval brings drift back: every declaration is synced again after it.
	ResyncInterval time.Duration
	// MaxConcurrentClusters bounds the clusters synced at once for one declaration.
	MaxConcurrentClusters int
	// MaxConcurrentReconciles bounds the declarations of the kind reconciled at once.
	MaxConcurrentReconciles int
	// RetryMaxDelay caps the backoff of a declaration whose clusters fail (it starts at 0.5s and
	// doubles): a cluster that comes back is synced within this long. Zero means one minute.
	RetryMaxDelay time.Duration
}

// engine returns the engine that reconciles declarations with these options; synced is the
// reconciler's memory of its syncs.
func (o *DeclarationOptions) engine(synced *syncMemo) engine {
	return engine{
		client: o.Client, reader: o.Reader, recorder: o.Recorder, hubID: o.HubID, resyncInterval: o.ResyncInterval, synced: synced,
		dispatch: dispatcher{gateway: o.Gateway, batcher: o.Batcher, maxClusters: o.MaxConcurrentClusters},
	}
}

// listsCluster reports whether a declaration's status has an entry for the cluster.
func listsCluster(clusters []policyhubv1.ClusterStatus, name string) bool {
	return slices.ContainsFunc(clusters, func(c policyhubv1.ClusterStatus) bool { return c.Name == name })
}

// engine runs a declaration's lifecycle: finalizer, suspend, placement and rendering, sync of
// every selected cluster (pruning those no longer selected), status, results, Events.
type engine struct {
	client         client.Client
	reader         client.Reader
	recorder       events.EventRecorder
	dispatch       dispatcher
	hubID          string
	resyncInterval time.Duration
	synced         *syncMemo
}

func (e engine) reconcile(ctx context.Context, key types.NamespacedName, d declaration) (ctrl.Result, error) {
	source := d.source(e.hubID)
	obj := d.object()
	if !obj.GetDeletionTimestamp().IsZero() {
		e.synced.forget(key)
		return e.finalize(ctx, d, source)
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		patch := client.MergeFrom(d.deepCopy().object())
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := e.client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := d.deepCopy()
	st := d.status()
	if d.suspended() {
		// Nothing is synced or pruned; the status says so, keeping the clusters' last state.
		ready := metav1.ConditionTrue
		if c := meta.FindStatusCondition(*st.conditions, policyhubv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			ready = c.Status
		}
		*st.observedGeneration = obj.GetGeneration()
		setConditions(st.conditions, metav1.Condition{
			Type: policyhubv1.ConditionReady, Status: ready, Reason: "Suspended", ObservedGeneration: obj.GetGeneration(),
			Message: "suspended: not syncing; the policies in the clusters are left as they are",
		}, nil, nil)
		return ctrl.Result{}, e.patchStatus(ctx, orig, d)
	}

	targets, err := d.targets(ctx)
	if invalid, ok := render.AsInvalid(err); ok {
		return e.stalled(ctx, d, orig, invalid.Reason, invalid.Err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	owned := ownedPolicies(targets.Objects)
	now := time.Now()
	inputs := fmt.Sprint(obj.GetGeneration(), obj.GetAnnotations(), targets.Fingerprint())
	if last, ok := e.synced.unchangedSince(key, inputs, e.resyncInterval, now); ok {
		// Nothing to sync (a summary changed): refresh the results only.
		firstStale := d.setResults(readSummaries(ctx, e.reader, *st.clusters), owned, now)
		if err := e.patchStatus(ctx, orig, d); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: minPositive(nextWake(e.resyncInterval, last, firstStale, now), d.afterStatus(ctx))}, nil
	}

	prune := d.prune()
	jobs := targetJobs(targets, prune)
	// Clusters that were synced before and are no longer selected: prune there, then forget them.
	// With prune off the policies stay there and the cluster just leaves the status.
	for _, s := range *st.clusters {
		if _, still := targets.Objects[s.Name]; !still && prune {
			jobs = append(jobs, syncJob{cluster: s.Name, decl: work.Declaration{Source: source, Prune: true}})
		}
	}
	kept, retry, pending := keepOutcomes(e.dispatch.syncAll(ctx, jobs), targets)
	*st.clusters = clusterStatuses(*st.clusters, kept, metav1.NewTime(now))
	firstStale := d.setResults(readSummaries(ctx, e.reader, *st.clusters), owned, now)
	*st.observedGeneration = obj.GetGeneration()
	var reconciling *metav1.Condition
	if retry {
		reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "RetryingClusters", Message: "some clusters failed or were locked; retrying with backoff"}
	}
	setConditions(st.conditions, readyCondition(*st.clusters, targets.Unknown, obj.GetGeneration()), reconciling, nil)
	if err := e.patchStatus(ctx, orig, d); err != nil {
		return ctrl.Result{}, err
	}
	emitSyncEvents(e.recorder, obj, *orig.status().clusters, kept)
	wake := d.afterStatus(ctx)
	if retry {
		e.synced.forget(key)
		return ctrl.Result{}, errRetry
	}
	if pending {
		e.synced.forget(key) // a sync cut short: the next reconcile syncs again
	} else {
		e.synced.remember(key, inputs, now)
	}
	return ctrl.Result{RequeueAfter: minPositive(nextWake(e.resyncInterval, now, firstStale, now), wake)}, nil
}

// keepOutcomes drops the clusters a declaration left and was pruned from, and says whether a
// cluster must be retried (failed, locked) or was left pending.
func keepOutcomes(outcomes []clusterOutcome, targets *render.Targets) (kept []clusterOutcome, retry, pending bool) {
	for _, o := range outcomes {
		leaving := targets.Objects[o.cluster] == nil
		if leaving && o.result.Phase == policyhubv1.ClusterPhaseSynced {
			continue // pruned: no longer part of this declaration
		}
		if leaving {
			o.result.Message = "no longer selected; pruning failed: " + o.result.Message
		}
		kept = append(kept, o)
		switch o.result.Phase {
		case policyhubv1.ClusterPhaseFailed, policyhubv1.ClusterPhaseLockHeld:
			retry = true
		case policyhubv1.ClusterPhasePending:
			pending = true
		}
	}
	return kept, retry, pending
}

// finalize prunes the declaration's policies from every cluster it was synced to, then lets it
// go. A cluster that cannot be pruned keeps the finalizer, and the status says which and why.
func (e engine) finalize(ctx context.Context, d declaration, source string) (ctrl.Result, error) {
	obj := d.object()
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	orig := d.deepCopy()
	st := d.status()
	if d.prune() {
		if stuck := e.dispatch.pruneEverywhere(ctx, source, *st.clusters); len(stuck) > 0 {
			*st.clusters = clusterStatuses(*st.clusters, stuck, metav1.Now())
			setConditions(st.conditions, metav1.Condition{
				Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "PruneFailed", ObservedGeneration: obj.GetGeneration(),
				Message: fmt.Sprintf("deleting: %d clusters still hold its policies and could not be pruned; the finalizer stays until they are", len(stuck)),
			}, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Pruning", Message: "retrying the prune with backoff"}, nil)
			if err := e.patchStatus(ctx, orig, d); err != nil {
				return ctrl.Result{}, err
			}
			e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "PruneFailed", "Delete", "could not prune %s: %s", stuck[0].cluster, stuck[0].result.Message)
			return ctrl.Result{}, errRetry
		}
	}
	patch := client.MergeFrom(d.deepCopy().object())
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := e.client.Patch(ctx, obj, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// stalled records a declaration that cannot be dispatched until the user changes it; nothing
// is sent to any cluster.
func (e engine) stalled(ctx context.Context, d, orig declaration, reason string, cause error) (ctrl.Result, error) {
	msg := policyhubv1.TruncateMessage(cause.Error(), 1024)
	obj := d.object()
	st := d.status()
	*st.observedGeneration = obj.GetGeneration()
	setConditions(st.conditions,
		metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()},
		nil, &metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	if err := e.patchStatus(ctx, orig, d); err != nil {
		return ctrl.Result{}, err
	}
	if meta.FindStatusCondition(*orig.status().conditions, policyhubv1.ConditionStalled) == nil {
		e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "nothing was dispatched: %s", msg)
	}
	// Retrying cannot help: the next spec change triggers a reconcile.
	return ctrl.Result{}, nil
}

// patchStatus writes the status when it changed (a no-op resync writes nothing).
func (e engine) patchStatus(ctx context.Context, orig, d declaration) error {
	if equality.Semantic.DeepEqual(orig.statusValue(), d.statusValue()) {
		return nil
	}
	if err := e.client.Status().Patch(ctx, d.object(), client.MergeFrom(orig.object())); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// declarationController starts a controller for a declaration kind with what every kind watches
// besides itself: spec and annotation changes (a requested reconcile), the inventory (clusters
// joining, leaving or changing labels: cluster-gateway's credential Secrets, metadata only), and
// the agents' summaries of the clusters it is in. Failed clusters are retried with a backoff
// from 0.5s up to retryMax (zero: one minute).
func declarationController(mgr ctrl.Manager, name string, obj client.Object, secretNamespace string, every, inCluster handler.MapFunc, maxReconciles int, retryMax time.Duration) *builder.TypedBuilder[reconcile.Request] {
	credentials := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[gateway.CredentialTypeLabel]
		return ok && o.GetNamespace() == secretNamespace
	})
	if retryMax <= 0 {
		retryMax = time.Minute
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(obj, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(every),
			builder.OnlyMetadata, builder.WithPredicates(credentials, predicate.Or(predicate.LabelChangedPredicate{}, createOrDelete()))).
		Watches(&policyhubv1.PolicyReportSummary{}, handler.EnqueueRequestsFromMapFunc(inCluster)).
		Named(name).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(maxReconciles, 1),
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](500*time.Millisecond, retryMax),
		})
}

// createOrDelete passes creations and deletions (a cluster joined or left).
func createOrDelete() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}
