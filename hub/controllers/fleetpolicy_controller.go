package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	gosync "sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	syncedMu gosync.Mutex
	synced   map[types.NamespacedName]lastSync
}

// lastSync is what a clean sync was made from, and when.
type lastSync struct {
	// inputs are the generation, annotations (a requested reconcile) and placement targets.
	inputs string
	at     time.Time
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
		r.forgetSync(req.NamespacedName)
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
	sel, err := placement.FleetPolicy(fp.Spec, inv)
	if err != nil {
		return r.stalled(ctx, fp, orig, "InvalidPlacement", err)
	}
	desired := map[string]*unstructured.Unstructured{}
	for _, t := range sel.Targets {
		obj, err := render.FleetPolicy(r.HubID, fp, t.Mode)
		if err != nil {
			return r.stalled(ctx, fp, orig, "InvalidTemplate", err)
		}
		desired[t.Cluster] = obj
	}

	owned := map[string][]aggregate.Policy{}
	for cluster, obj := range desired {
		owned[cluster] = []aggregate.Policy{{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	}
	now := time.Now()
	inputs := syncInputs(fp, sel)
	if last, ok := r.lastSync(req.NamespacedName); ok && last.inputs == inputs && (r.ResyncInterval <= 0 || now.Sub(last.at) < r.ResyncInterval) {
		// Nothing to sync (a summary changed): refresh the results only.
		var firstStale time.Time
		fp.Status.Clusters, firstStale = r.withResults(ctx, fp.Status.Clusters, owned, now)
		fp.Status.Summary = summarize(fp.Status.Clusters)
		if err := r.patchStatus(ctx, orig, fp); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.nextWake(last.at, firstStale, now)}, nil
	}

	prune := fp.Spec.Prune == nil || *fp.Spec.Prune
	var jobs []syncJob
	for _, t := range sel.Targets {
		jobs = append(jobs, syncJob{cluster: t.Cluster, decl: hubsync.Declaration{
			Source: source, Objects: []*unstructured.Unstructured{desired[t.Cluster]}, DryRun: t.DryRun, Prune: prune}})
	}
	// Clusters that were synced before and are no longer selected: prune there, then forget them.
	// With prune off the policy stays there and the cluster just leaves the status.
	for _, s := range fp.Status.Clusters {
		if _, still := desired[s.Name]; !still {
			if prune {
				jobs = append(jobs, syncJob{cluster: s.Name, decl: hubsync.Declaration{Source: source, Prune: true}})
			}
		}
	}
	outcomes := r.syncAll(ctx, jobs)

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
	fp.Status.Clusters, firstStale = r.withResults(ctx, clusterStatuses(fp.Status.Clusters, kept, metav1.NewTime(now)), owned, now)
	fp.Status.Summary = summarize(fp.Status.Clusters)
	fp.Status.ObservedGeneration = fp.Generation
	var reconciling *metav1.Condition
	if retry {
		reconciling = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "RetryingClusters", Message: "some clusters failed or were locked; retrying with backoff"}
	}
	setConditions(&fp.Status.Conditions, readyCondition(fp.Status.Clusters, sel.Unknown, fp.Generation), reconciling, nil)
	if err := r.patchStatus(ctx, orig, fp); err != nil {
		return ctrl.Result{}, err
	}
	r.emitEvents(fp, orig.Status.Clusters, kept)
	if retry {
		r.forgetSync(req.NamespacedName)
		return ctrl.Result{}, errRetry
	}
	if pending {
		r.forgetSync(req.NamespacedName) // a sync cut short: the next reconcile syncs again
	} else {
		r.rememberSync(req.NamespacedName, lastSync{inputs: inputs, at: now})
	}
	return ctrl.Result{RequeueAfter: r.nextWake(now, firstStale, now)}, nil
}

// syncInputs is what a sync depends on besides the clusters themselves: the spec (generation),
// the annotations (a requested reconcile) and the placement's outcome.
func syncInputs(fp *policyhubv1.FleetPolicy, sel placement.Selection) string {
	var b strings.Builder
	fmt.Fprint(&b, fp.Generation, fp.Annotations, sel.Unknown)
	for _, t := range sel.Targets {
		mode := ""
		if t.Mode != nil {
			mode = string(*t.Mode)
		}
		fmt.Fprintf(&b, " %s/%s/%v", t.Cluster, mode, t.DryRun)
	}
	return b.String()
}

func (r *FleetPolicyReconciler) lastSync(key types.NamespacedName) (lastSync, bool) {
	r.syncedMu.Lock()
	defer r.syncedMu.Unlock()
	last, ok := r.synced[key]
	return last, ok
}

func (r *FleetPolicyReconciler) rememberSync(key types.NamespacedName, last lastSync) {
	r.syncedMu.Lock()
	defer r.syncedMu.Unlock()
	if r.synced == nil {
		r.synced = map[types.NamespacedName]lastSync{}
	}
	r.synced[key] = last
}

func (r *FleetPolicyReconciler) forgetSync(key types.NamespacedName) {
	r.syncedMu.Lock()
	defer r.syncedMu.Unlock()
	delete(r.synced, key)
}

// nextWake is when the FleetPolicy needs a reconcile without any event: its next resync (counted
// from the last sync, so frequent summaries never postpone it), or sooner when a cluster's
// results turn stale (firstStale, zero when none will).
func (r *FleetPolicyReconciler) nextWake(lastSync, firstStale, now time.Time) time.Duration {
	wake := time.Duration(0)
	if r.ResyncInterval > 0 {
		wake = max(lastSync.Add(r.ResyncInterval).Sub(now), time.Millisecond)
	}
	if !firstStale.IsZero() {
		if stale := max(firstStale.Sub(now)+time.Second, time.Millisecond); wake == 0 || stale < wake {
			wake = stale
		}
	}
	return wake
}

// withResults sets each cluster's report results from the summary its agent pushed, when the hub
// accepts that summary; results of the policies the FleetPolicy owns there only.
func (r *FleetPolicyReconciler) withResults(ctx context.Context, clusters []policyhubv1.ClusterStatus, owned map[string][]aggregate.Policy, now time.Time) ([]policyhubv1.ClusterStatus, time.Time) {
	summaries := map[string]*policyhubv1.PolicyReportSummarySpec{}
	for _, c := range clusters {
		s := &policyhubv1.PolicyReportSummary{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: c.Name, Name: policyhubv1.SummaryName}, s)
		switch {
		case err == nil && acceptedSummary(s) == nil:
			summaries[c.Name] = &s.Spec
		case err != nil && client.IgnoreNotFound(err) != nil:
			log.FromContext(ctx).Error(err, "read the cluster's summary", "cluster", c.Name)
		}
	}
	return setResults(clusters, summaries, owned, now)
}

type syncJob struct {
	cluster string
	decl    hubsync.Declaration
}

// syncAll syncs the jobs' clusters in parallel, at most MaxConcurrentClusters at a time; one slow or
// broken cluster never holds up the others beyond its own slot.
func (r *FleetPolicyReconciler) syncAll(ctx context.Context, jobs []syncJob) []clusterOutcome {
	limit := r.MaxConcurrentClusters
	if limit <= 0 {
		limit = 8
	}
	outcomes := make([]clusterOutcome, len(jobs))
	sem := make(chan struct{}, limit)
	var wg gosync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outcomes[i] = r.syncOne(ctx, job)
		}()
	}
	wg.Wait()
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].cluster < outcomes[j].cluster })
	return outcomes
}

func (r *FleetPolicyReconciler) syncOne(ctx context.Context, job syncJob) clusterOutcome {
	cfg, err := gateway.ClusterConfig(r.Gateway, job.cluster)
	if err != nil {
		return clusterOutcome{cluster: job.cluster, result: &hubsync.DeclarationResult{Source: job.decl.Source, Phase: policyhubv1.ClusterPhaseFailed, Message: err.Error()}}
	}
	out := r.Batcher.Sync(log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", job.cluster)), hubsync.Cluster{Name: job.cluster, Config: cfg}, job.decl)
	return clusterOutcome{cluster: job.cluster, result: out.Result, wrote: out.Wrote}
}

// finalize prunes the FleetPolicy's policies from every cluster it was synced to, then lets it go.
// A cluster that cannot be pruned keeps the finalizer, and the status says which and why.
func (r *FleetPolicyReconciler) finalize(ctx context.Context, fp *policyhubv1.FleetPolicy, source string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fp, Finalizer) {
		return ctrl.Result{}, nil
	}
	orig := fp.DeepCopy()
	if fp.Spec.Prune == nil || *fp.Spec.Prune {
		var jobs []syncJob
		for _, s := range fp.Status.Clusters {
			jobs = append(jobs, syncJob{cluster: s.Name, decl: hubsync.Declaration{Source: source, Prune: true}})
		}
		var stuck []clusterOutcome
		for _, o := range r.syncAll(ctx, jobs) {
			if o.result.Phase != policyhubv1.ClusterPhaseSynced {
				o.result.Message = "deleting: could not prune this cluster yet: " + o.result.Message
				stuck = append(stuck, o)
			}
		}
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

// emitEvents records the clusters whose phase changed or that were written to: a Warning per
// cluster in trouble, and one Normal Event for all the clusters that synced.
func (r *FleetPolicyReconciler) emitEvents(fp *policyhubv1.FleetPolicy, before []policyhubv1.ClusterStatus, outcomes []clusterOutcome) {
	prev := map[string]policyhubv1.ClusterPhase{}
	for _, s := range before {
		prev[s.Name] = s.Phase
	}
	var synced []string
	for _, o := range outcomes {
		if prev[o.cluster] == o.result.Phase && !o.wrote {
			continue
		}
		switch o.result.Phase {
		case policyhubv1.ClusterPhaseSynced, policyhubv1.ClusterPhaseDryRun:
			synced = append(synced, fmt.Sprintf("%s (%s)", o.cluster, o.result.Message))
		default:
			r.Recorder.Eventf(fp, nil, corev1.EventTypeWarning, string(o.result.Phase), "Sync", "%s: %s", o.cluster, o.result.Message)
		}
	}
	if len(synced) > 0 {
		r.Recorder.Eventf(fp, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", truncate(strings.Join(synced, "; "), 1024))
	}
}
