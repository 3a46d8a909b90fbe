package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	hubsync "github.com/policyhub/policyhub/hub/sync"
)

// ApplicationGVK is KubeVela's Application.
var ApplicationGVK = schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"}

// ApplicationPolicyReconciler syncs ApplicationPolicies into the clusters their placement (or
// their KubeVela Application's topology) selects, through the same engine as FleetPolicies, and
// reports the application's own results.
type ApplicationPolicyReconciler struct {
	Client          client.Client
	Reader          client.Reader
	Gateway         *rest.Config
	SecretNamespace string
	HubID           string
	Batcher         *hubsync.Batcher
	Recorder        events.EventRecorder
	ResyncInterval  time.Duration
	// MaxConcurrentClusters bounds the clusters synced at once for one ApplicationPolicy.
	MaxConcurrentClusters   int
	MaxConcurrentReconciles int
	RetryMaxDelay           time.Duration
	// KubeVela is true when the hub serves KubeVela's Application: placement then defaults to the
	// application's topology, and results are mirrored into its status.policy.
	KubeVela bool
	// ApplicationStatusInterval is the least time between two writes of one Application's
	// status (each write makes KubeVela reconcile the Application); zero means 10s.
	ApplicationStatusInterval time.Duration

	synced    syncMemo
	appWrites appWriteClock
}

// SetupWithManager registers the reconciler: ApplicationPolicy changes, inventory changes,
// summaries of the clusters it is in, and (with KubeVela) its Application's changes trigger it.
func (r *ApplicationPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	credentials := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[gateway.CredentialTypeLabel]
		return ok && o.GetNamespace() == r.SecretNamespace
	})
	retryMax := r.RetryMaxDelay
	if retryMax <= 0 {
		retryMax = time.Minute
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&policyhubv1.ApplicationPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.every),
			builder.OnlyMetadata, builder.WithPredicates(credentials, predicate.Or(predicate.LabelChangedPredicate{}, createOrDelete()))).
		Watches(&policyhubv1.PolicyReportSummary{}, handler.EnqueueRequestsFromMapFunc(r.inCluster))
	if r.KubeVela {
		app := &unstructured.Unstructured{}
		app.SetGroupVersionKind(ApplicationGVK)
		b = b.Watches(app, handler.EnqueueRequestsFromMapFunc(r.ofApplication), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Named("applicationpolicy").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1),
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](500*time.Millisecond, retryMax),
		}).
		Complete(r)
}

func (r *ApplicationPolicyReconciler) list(ctx context.Context, opts ...client.ListOption) []policyhubv1.ApplicationPolicy {
	list := &policyhubv1.ApplicationPolicyList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "list ApplicationPolicies")
		return nil
	}
	return list.Items
}

func (r *ApplicationPolicyReconciler) every(ctx context.Context, _ client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ap := range r.list(ctx) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ap)})
	}
	return reqs
}

func (r *ApplicationPolicyReconciler) inCluster(ctx context.Context, summary client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ap := range r.list(ctx) {
		for _, c := range ap.Status.Clusters {
			if c.Name == summary.GetNamespace() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ap)})
				break
			}
		}
	}
	return reqs
}

func (r *ApplicationPolicyReconciler) ofApplication(ctx context.Context, app client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ap := range r.list(ctx, client.InNamespace(app.GetNamespace())) {
		if ap.Spec.Application == app.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ap)})
		}
	}
	return reqs
}

func (r *ApplicationPolicyReconciler) dispatcher() dispatcher {
	return dispatcher{gateway: r.Gateway, batcher: r.Batcher, maxClusters: r.MaxConcurrentClusters}
}

// Reconcile runs placement → render → sync for one ApplicationPolicy and records the outcome.
func (r *ApplicationPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ap := &policyhubv1.ApplicationPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, ap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	source := render.Owner{HubID: r.HubID, Kind: "ApplicationPolicy", Namespace: ap.Namespace, Name: ap.Name}.Source()
	if !ap.DeletionTimestamp.IsZero() {
		r.synced.forget(req.NamespacedName)
		return r.finalize(ctx, ap, source)
	}
	if !controllerutil.ContainsFinalizer(ap, Finalizer) {
		patch := client.MergeFrom(ap.DeepCopy())
		controllerutil.AddFinalizer(ap, Finalizer)
		if err := r.Client.Patch(ctx, ap, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := ap.DeepCopy()
	if ap.Spec.Suspend {
		ap.Status.ObservedGeneration = ap.Generation
		setConditions(&ap.Status.Conditions, metav1.Condition{
			Type: policyhubv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Suspended", ObservedGeneration: ap.Generation,
			Message: "suspended: not syncing; the policies in the clusters are left as they are",
		}, nil, nil)
		return ctrl.Result{}, r.patchStatus(ctx, orig, ap)
	}

	inv, err := placement.ReadInventory(ctx, r.Reader, r.SecretNamespace)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the cluster inventory: %w", err)
	}
	app, err := r.application(ctx, ap)
	if err != nil {
		return ctrl.Result{}, err
	}
	var topologies []placement.Topology
	if app != nil && ap.Spec.Placement == nil {
		if topologies, err = placement.Topologies(app); err != nil {
			return r.stalled(ctx, ap, orig, "InvalidPlacement", err)
		}
	}
	targets, err := render.ApplicationPolicyTargets(r.HubID, ap, topologies, inv)
	if invalid, ok := render.AsInvalid(err); ok {
		return r.stalled(ctx, ap, orig, invalid.Reason, invalid.Err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := targets.Objects
	owned := ownedPolicies(desired)

	now := time.Now()
	inputs := fmt.Sprint(ap.Generation, ap.Annotations, targets.Fingerprint())
	if last, ok := r.synced.unchangedSince(req.NamespacedName, inputs, r.ResyncInterval, now); ok {
		firstStale := r.setResults(ctx, ap, owned, now)
		if err := r.patchStatus(ctx, orig, ap); err != nil {
			return ctrl.Result{}, err
		}
		wake := nextWake(r.ResyncInterval, last, firstStale, now)
		return ctrl.Result{RequeueAfter: minPositive(wake, r.mirror(ctx, ap, app))}, nil
	}

	prune := ap.Spec.Prune == nil || *ap.Spec.Prune
	jobs := targetJobs(targets, prune)
	for _, s := range ap.Status.Clusters {
		if _, still := desired[s.Name]; !still && prune {
			jobs = append(jobs, syncJob{cluster: s.Name, decl: hubsync.Declaration{Source: source, Prune: true}})
		}
	}
	outcomes := r.dispatcher().syncAll(ctx, jobs)
	var kept []clusterOutcome
	retry, pending := false, false
	for _, o := range outcomes {
		leaving := desired[o.cluster] == nil
		if leaving && o.result.Phase == policyhubv1.ClusterPhaseSynced {
			continue
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
	ap.Status.Clusters = clusterStatuses(ap.Status.Clusters, kept, metav1.NewTime(now))
	firstStale := r.setResults(ctx, ap, owned, now)
	ap.Status.ObservedGeneration = ap.Generation
	var reconciling *metav1.Condition
	if retry {
		reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "RetryingClusters", Message: "some clusters failed or were locked; retrying with backoff"}
	}
	setConditions(&ap.Status.Conditions, readyCondition(ap.Status.Clusters, targets.Unknown, ap.Generation), reconciling, nil)
	if err := r.patchStatus(ctx, orig, ap); err != nil {
		return ctrl.Result{}, err
	}
	emitSyncEvents(r.Recorder, ap, orig.Status.Clusters, kept)
	mirrorWake := r.mirror(ctx, ap, app)
	if retry {
		r.synced.forget(req.NamespacedName)
		return ctrl.Result{}, errRetry
	}
	if pending {
		r.synced.forget(req.NamespacedName)
	} else {
		r.synced.remember(req.NamespacedName, inputs, now)
	}
	return ctrl.Result{RequeueAfter: minPositive(nextWake(r.ResyncInterval, now, firstStale, now), mirrorWake)}, nil
}

// application is the KubeVela Application the ApplicationPolicy is about, when KubeVela is
// served and the Application exists; nil otherwise.
func (r *ApplicationPolicyReconciler) application(ctx context.Context, ap *policyhubv1.ApplicationPolicy) (*unstructured.Unstructured, error) {
	if !r.KubeVela || ap.Spec.Application == "" {
		return nil, nil
	}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(ApplicationGVK)
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ap.Namespace, Name: ap.Spec.Application}, app); err != nil {
		if client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read application %s/%s: %w", ap.Namespace, ap.Spec.Application, err)
	}
	return app, nil
}

// setResults fills the status with this application's results from the clusters' summaries, and
// says when the first fresh results turn stale.
func (r *ApplicationPolicyReconciler) setResults(ctx context.Context, ap *policyhubv1.ApplicationPolicy, owned map[string][]aggregate.Policy, now time.Time) time.Time {
	summaries := readSummaries(ctx, r.Reader, ap.Status.Clusters)
	var firstStale time.Time
	ap.Status.Clusters, firstStale = setResults(ap.Status.Clusters, summaries, owned, now)
	ap.Status.Policies, ap.Status.TopViolations = applicationResults(ap.Spec.Application, ap.Status.Clusters, summaries, owned)
	ap.Status.Summary = summarize(ap.Status.Clusters)
	return firstStale
}

func (r *ApplicationPolicyReconciler) finalize(ctx context.Context, ap *policyhubv1.ApplicationPolicy, source string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ap, Finalizer) {
		return ctrl.Result{}, nil
	}
	orig := ap.DeepCopy()
	if ap.Spec.Prune == nil || *ap.Spec.Prune {
		if stuck := r.dispatcher().pruneEverywhere(ctx, source, ap.Status.Clusters); len(stuck) > 0 {
			ap.Status.Clusters = clusterStatuses(ap.Status.Clusters, stuck, metav1.Now())
			setConditions(&ap.Status.Conditions, metav1.Condition{
				Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "PruneFailed", ObservedGeneration: ap.Generation,
				Message: fmt.Sprintf("deleting: %d clusters still hold the application's policies and could not be pruned; the finalizer stays until they are", len(stuck)),
			}, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Pruning", Message: "retrying the prune with backoff"}, nil)
			if err := r.patchStatus(ctx, orig, ap); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(ap, nil, corev1.EventTypeWarning, "PruneFailed", "Delete", "could not prune %s: %s", stuck[0].cluster, stuck[0].result.Message)
			return ctrl.Result{}, errRetry
		}
	}
	patch := client.MergeFrom(ap.DeepCopy())
	controllerutil.RemoveFinalizer(ap, Finalizer)
	if err := r.Client.Patch(ctx, ap, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// stalled records an ApplicationPolicy that cannot be dispatched until the user changes it;
// nothing is sent to any cluster.
func (r *ApplicationPolicyReconciler) stalled(ctx context.Context, ap, orig *policyhubv1.ApplicationPolicy, reason string, cause error) (ctrl.Result, error) {
	msg := truncate(cause.Error(), 1024)
	ap.Status.ObservedGeneration = ap.Generation
	setConditions(&ap.Status.Conditions,
		metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: ap.Generation},
		nil, &metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	if err := r.patchStatus(ctx, orig, ap); err != nil {
		return ctrl.Result{}, err
	}
	if meta.FindStatusCondition(orig.Status.Conditions, policyhubv1.ConditionStalled) == nil {
		r.Recorder.Eventf(ap, nil, corev1.EventTypeWarning, reason, "Reconcile", "nothing was dispatched: %s", msg)
	}
	return ctrl.Result{}, nil
}

func (r *ApplicationPolicyReconciler) patchStatus(ctx context.Context, orig, ap *policyhubv1.ApplicationPolicy) error {
	if equality.Semantic.DeepEqual(orig.Status, ap.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, ap, client.MergeFrom(orig)); err != nil {
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
