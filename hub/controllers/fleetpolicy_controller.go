package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	hubsync "github.com/policyhub/policyhub/hub/sync"
)

// Finalizer keeps a FleetPolicy until its policies are pruned from every cluster.
const Finalizer = "policyhub.io/prune"

// FleetPolicyReconciler syncs FleetPolicies into the clusters their placement selects.
type FleetPolicyReconciler struct {
	// Client reads and writes the hub (FleetPolicies and their status).
	Client client.Client
	// Reader reads the inventory (gateway Secrets' metadata, OCM objects); the manager's cached
	// client serves it from watches.
	Reader client.Reader
	// Gateway reaches cluster-gateway: the hub's config (aggregation layer) or the gateway's URL.
	Gateway *rest.Config
	// SecretNamespace is the gateway's credential-secret namespace.
	SecretNamespace string
	HubID           string
	// Batcher syncs the clusters, batching the declarations of concurrent reconciles per cluster.
	Batcher  *hubsync.Batcher
	Recorder events.EventRecorder
	// ResyncInterval brings drift back: every FleetPolicy is synced again after it.
	ResyncInterval time.Duration
	// MaxConcurrentClusters bounds the clusters synced at once for one FleetPolicy.
	MaxConcurrentClusters int
	// MaxConcurrentReconciles bounds the FleetPolicies reconciled at once.
	MaxConcurrentReconciles int
	// RetryMaxDelay caps the backoff of a FleetPolicy whose clusters fail (it starts at 0.5s and
	// doubles): a cluster that comes back is synced within this long. Zero means one minute.
	RetryMaxDelay time.Duration

	// synced remembers, per FleetPolicy, the last sync that left every cluster in a final state,
	// so a reconcile woken only by an agent's summary updates the results without syncing again.
	synced syncMemo
}

// SetupWithManager registers the reconciler: FleetPolicy spec changes, and changes of the
// inventory (gateway credential Secrets, metadata only), trigger it.
func (r *FleetPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	credentials := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[gateway.CredentialTypeLabel]
		return ok && o.GetNamespace() == r.SecretNamespace
	})
	retryMax := r.RetryMaxDelay
	if retryMax <= 0 {
		retryMax = time.Minute
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&policyhubv1.FleetPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.everyFleetPolicy),
			builder.OnlyMetadata, builder.WithPredicates(credentials, predicate.Or(predicate.LabelChangedPredicate{}, createOrDelete()))).
		Watches(&policyhubv1.PolicyReportSummary{}, handler.EnqueueRequestsFromMapFunc(r.fleetPoliciesInCluster)).
		Named("fleetpolicy").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1),
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](500*time.Millisecond, retryMax),
		}).
		Complete(r)
}

// createOrDelete passes creations and deletions (a cluster joined or left).
func createOrDelete() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
}

func (r *FleetPolicyReconciler) everyFleetPolicy(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &policyhubv1.FleetPolicyList{}
	if err := r.Client.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "list FleetPolicies after an inventory change")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, fp := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fp)})
	}
	return reqs
}

// fleetPoliciesInCluster maps a cluster's summary to the FleetPolicies synced to that cluster:
// their results come from it.
func (r *FleetPolicyReconciler) fleetPoliciesInCluster(ctx context.Context, summary client.Object) []reconcile.Request {
	list := &policyhubv1.FleetPolicyList{}
	if err := r.Client.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "list FleetPolicies after a summary change")
		return nil
	}
	var reqs []reconcile.Request
	for _, fp := range list.Items {
		for _, c := range fp.Status.Clusters {
			if c.Name == summary.GetNamespace() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fp)})
				break
			}
		}
	}
	return reqs
}

// errRetry makes controller-runtime retry with its per-object exponential backoff.
var errRetry = errors.New("some clusters are not synced yet")

// Reconcile runs placement → render → sync for one FleetPolicy and records the outcome.
func (r *FleetPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fp := &policyhubv1.FleetPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, fp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	source := render.Owner{HubID: r.HubID, Kind: "FleetPolicy", Name: fp.Name}.Source()
	if !fp.DeletionTimestamp.IsZero() {
		r.synced.forget(req.NamespacedName)
		return r.finalize(ctx, fp, source)
	}
	if !controllerutil.ContainsFinalizer(fp, Finalizer) {
		patch := client.MergeFrom(fp.DeepCopy())
		controllerutil.AddFinalizer(fp, Finalizer)
		if err := r.Client.Patch(ctx, fp, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := fp.DeepCopy()
	if fp.Spec.Suspend {
		// Nothing is synced or pruned; the status says so, keeping the clusters' last state.
		ready := metav1.ConditionTrue
		if c := meta.FindStatusCondition(fp.Status.Conditions, policyhubv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			ready = c.Status
		}
		fp.Status.ObservedGeneration = fp.Generation
		setConditions(&fp.Status.Conditions, metav1.Condition{
			Type: policyhubv1.ConditionReady, Status: ready, Reason: "Suspended", ObservedGeneration: fp.Generation,
			Message: "suspended: not syncing; the policies in the clusters are left as they are",
		}, nil, nil)
		return ctrl.Result{}, r.patchStatus(ctx, orig, fp)
	}

	inv, err := placement.ReadInventory(ctx, r.Reader, r.SecretNamespace)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the cluster inventory: %w", err)
	}
	targets, err := render.FleetPolicyTargets(r.HubID, fp, inv)
	if invalid, ok := render.AsInvalid(err); ok {
		return r.stalled(ctx, fp, orig, invalid.Reason, invalid.Err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := targets.Objects
	owned := ownedPolicies(desired)
	now := time.Now()
	inputs := fmt.Sprint(fp.Generation, fp.Annotations, targets.Fingerprint())
	if last, ok := r.synced.unchangedSince(req.NamespacedName, inputs, r.ResyncInterval, now); ok {
		// Nothing to sync (a summary changed): refresh the results only.
		var firstStale time.Time
		fp.Status.Clusters, firstStale = setResults(fp.Status.Clusters, readSummaries(ctx, r.Reader, fp.Status.Clusters), owned, now)
		fp.Status.Summary = summarize(fp.Status.Clusters)
		if err := r.patchStatus(ctx, orig, fp); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: nextWake(r.ResyncInterval, last, firstStale, now)}, nil
	}

	prune := fp.Spec.Prune == nil || *fp.Spec.Prune
	jobs := targetJobs(targets, prune)
	// Clusters that were synced before and are no longer selected: prune there, then forget them.
	// With prune off the policy stays there and the cluster just leaves the status.
	for _, s := range fp.Status.Clusters {
		if _, still := desired[s.Name]; !still {
			if prune {
				jobs = append(jobs, syncJob{cluster: s.Name, decl: hubsync.Declaration{Source: source, Prune: true}})
			}
		}
	}
	outcomes := r.dispatcher().syncAll(ctx, jobs)

	var kept []clusterOutcome
	retry, pending := false, false
	for _, o := range outcomes {
		leavingCluster := desired[o.cluster] == nil
		if leavingCluster && o.result.Phase == policyhubv1.ClusterPhaseSynced {
			continue // pruned: no longer part of this FleetPolicy
		}
		if leavingCluster {
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
	var firstStale time.Time
	fp.Status.Clusters = clusterStatuses(fp.Status.Clusters, kept, metav1.NewTime(now))
	fp.Status.Clusters, firstStale = setResults(fp.Status.Clusters, readSummaries(ctx, r.Reader, fp.Status.Clusters), owned, now)
	fp.Status.Summary = summarize(fp.Status.Clusters)
	fp.Status.ObservedGeneration = fp.Generation
	var reconciling *metav1.Condition
	if retry {
		reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "RetryingClusters", Message: "some clusters failed or were locked; retrying with backoff"}
	}
	setConditions(&fp.Status.Conditions, readyCondition(fp.Status.Clusters, targets.Unknown, fp.Generation), reconciling, nil)
	if err := r.patchStatus(ctx, orig, fp); err != nil {
		return ctrl.Result{}, err
	}
	emitSyncEvents(r.Recorder, fp, orig.Status.Clusters, kept)
	if retry {
		r.synced.forget(req.NamespacedName)
		return ctrl.Result{}, errRetry
	}
	if pending {
		r.synced.forget(req.NamespacedName) // a sync cut short: the next reconcile syncs again
	} else {
		r.synced.remember(req.NamespacedName, inputs, now)
	}
	return ctrl.Result{RequeueAfter: nextWake(r.ResyncInterval, now, firstStale, now)}, nil
}

func (r *FleetPolicyReconciler) dispatcher() dispatcher {
	return dispatcher{gateway: r.Gateway, batcher: r.Batcher, maxClusters: r.MaxConcurrentClusters}
}

// finalize prunes the FleetPolicy's policies from every cluster it was synced to, then lets it go.
// A cluster that cannot be pruned keeps the finalizer, and the status says which and why.
func (r *FleetPolicyReconciler) finalize(ctx context.Context, fp *policyhubv1.FleetPolicy, source string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fp, Finalizer) {
		return ctrl.Result{}, nil
	}
	orig := fp.DeepCopy()
	if fp.Spec.Prune == nil || *fp.Spec.Prune {
		stuck := r.dispatcher().pruneEverywhere(ctx, source, fp.Status.Clusters)
		if len(stuck) > 0 {
			fp.Status.Clusters = clusterStatuses(fp.Status.Clusters, stuck, metav1.Now())
			setConditions(&fp.Status.Conditions, metav1.Condition{
				Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "PruneFailed", ObservedGeneration: fp.Generation,
				Message: fmt.Sprintf("deleting: %d clusters still hold this policy and could not be pruned; the finalizer stays until they are", len(stuck)),
			}, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Pruning", Message: "retrying the prune with backoff"}, nil)
			if err := r.patchStatus(ctx, orig, fp); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(fp, nil, corev1.EventTypeWarning, "PruneFailed", "Delete", "could not prune %s: %s", stuck[0].cluster, stuck[0].result.Message)
			return ctrl.Result{}, errRetry
		}
	}
	patch := client.MergeFrom(fp.DeepCopy())
	controllerutil.RemoveFinalizer(fp, Finalizer)
	if err := r.Client.Patch(ctx, fp, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// stalled records a declaration that cannot be dispatched until the user changes it.
func (r *FleetPolicyReconciler) stalled(ctx context.Context, fp, orig *policyhubv1.FleetPolicy, reason string, cause error) (ctrl.Result, error) {
	msg := truncate(cause.Error(), 1024)
	fp.Status.ObservedGeneration = fp.Generation
	setConditions(&fp.Status.Conditions,
		metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: fp.Generation},
		nil, &metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	if err := r.patchStatus(ctx, orig, fp); err != nil {
		return ctrl.Result{}, err
	}
	if meta.FindStatusCondition(orig.Status.Conditions, policyhubv1.ConditionStalled) == nil {
		r.Recorder.Eventf(fp, nil, corev1.EventTypeWarning, reason, "Reconcile", "nothing was dispatched: %s", msg)
	}
	// Retrying cannot help: the next spec change triggers a reconcile.
	return ctrl.Result{}, nil
}

// patchStatus writes the status when it changed (a no-op resync writes nothing).
func (r *FleetPolicyReconciler) patchStatus(ctx context.Context, orig, fp *policyhubv1.FleetPolicy) error {
	if equality.Semantic.DeepEqual(orig.Status, fp.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, fp, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
