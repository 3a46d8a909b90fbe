package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
)

// ApplicationPolicyReconciler syncs ApplicationPolicies into the clusters their placement (or
// their KubeVela Application's topology) selects, through the same engine as FleetPolicies, and
// reports the application's own results.
type ApplicationPolicyReconciler struct {
	// DeclarationOptions are best the FleetPolicy reconciler's (its Batcher in particular): both
	// kinds then share each cluster's passes.
	engine.DeclarationOptions
	// KubeVela is true when the hub serves KubeVela's Application: placement then defaults to the
	// application's topology, and results are mirrored into its status.policy.
	KubeVela bool
	// ClusterSetBindings is true when the hub serves OCM's ManagedClusterSetBinding: a binding in
	// a tenant's namespace grants it the set's clusters.
	ClusterSetBindings bool
	// ApplicationStatusInterval is the least time between two writes of one Application's
	// status (each write makes KubeVela reconcile the Application); zero means 10s.
	ApplicationStatusInterval time.Duration

	room      engine.Room
	appWrites appWriteClock
}

// SetupWithManager registers the reconciler: ApplicationPolicy changes, inventory changes,
// summaries of the clusters it is in, and (with KubeVela) its Application's changes trigger it.
func (r *ApplicationPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := engine.ControllerFor(mgr, "applicationpolicy", policyhubv1.KindApplicationPolicy, &policyhubv1.ApplicationPolicy{}, &r.DeclarationOptions, &r.room, r.every, r.inCluster, r.ofPlacement)
	// A grant given, changed or taken back changes where its tenants' policies may go.
	b = b.Watches(&policyhubv1.TenantGrant{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.ofGrant)), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.ClusterSetBindings {
		binding := &metav1.PartialObjectMetadata{}
		binding.SetGroupVersionKind(clusterv1beta2.GroupVersion.WithKind("ManagedClusterSetBinding"))
		b = b.Watches(binding, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.inNamespace)), builder.OnlyMetadata, builder.WithPredicates(engine.CreateOrDelete()))
	}
	if r.KubeVela {
		app := &unstructured.Unstructured{}
		app.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
		b = b.Watches(app, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(r.ofApplication)), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}

// list reads the ApplicationPolicies for the event maps: the cache's own objects, not copies
// (see readOnlyList), so they must not be changed.
func (r *ApplicationPolicyReconciler) list(ctx context.Context, opts ...client.ListOption) []policyhubv1.ApplicationPolicy {
	list := &policyhubv1.ApplicationPolicyList{}
	if err := r.Client.List(ctx, list, append(opts, engine.ReadOnlyList)...); err != nil {
		log.FromContext(ctx).Error(err, "list ApplicationPolicies")
		return nil
	}
	return list.Items
}

func (r *ApplicationPolicyReconciler) every(ctx context.Context, _ client.Object) []reconcile.Request {
	return engine.RequestsFor[policyhubv1.ApplicationPolicy](r.list(ctx), nil)
}

// ofPlacement maps an OCM Placement or PlacementDecision to the ApplicationPolicies whose
// placementRef names the Placement (a ref without a namespace names one in the policy's own).
func (r *ApplicationPolicyReconciler) ofPlacement(ctx context.Context, obj client.Object) []reconcile.Request {
	key := placement.PlacementOf(obj)
	return engine.RequestsFor(r.list(ctx), func(ap *policyhubv1.ApplicationPolicy) bool {
		return placement.Names(ap.Spec.Placement, ap.Namespace, key)
	})
}

// ofGrant maps a TenantGrant to the ApplicationPolicies of its tenants (before and after a change:
// a tenant removed from a grant loses reach, so every tenant's policies are looked at again).
func (r *ApplicationPolicyReconciler) ofGrant(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.every(ctx, nil)
}

// inNamespace maps an OCM ManagedClusterSetBinding to the ApplicationPolicies of its namespace.
func (r *ApplicationPolicyReconciler) inNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	return engine.RequestsFor[policyhubv1.ApplicationPolicy](r.list(ctx, client.InNamespace(obj.GetNamespace())), nil)
}

// inCluster maps a cluster's summary to the ApplicationPolicies whose slices hold the cluster.
func (r *ApplicationPolicyReconciler) inCluster(ctx context.Context, summary client.Object) []reconcile.Request {
	return engine.DeclarationsInCluster(ctx, r.Reader, policyhubv1.KindApplicationPolicy, "", summary.GetNamespace())
}

func (r *ApplicationPolicyReconciler) ofApplication(ctx context.Context, app client.Object) []reconcile.Request {
	return engine.RequestsFor(r.list(ctx, client.InNamespace(app.GetNamespace())), func(ap *policyhubv1.ApplicationPolicy) bool {
		return ap.Spec.Application == app.GetName()
	})
}

// Reconcile runs placement → render → sync for one ApplicationPolicy and records the outcome.
func (r *ApplicationPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ap := &policyhubv1.ApplicationPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, ap); err != nil {
		if apierrors.IsNotFound(err) {
			r.room.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.Engine(&r.room).Reconcile(ctx, req.NamespacedName, &applicationPolicy{ApplicationPolicy: ap, r: r})
}

// applicationPolicy is an ApplicationPolicy as the engine's declaration.
type applicationPolicy struct {
	*policyhubv1.ApplicationPolicy
	r *ApplicationPolicyReconciler
	// clusters is its state in each cluster (set by setResults), for the Application's mirror.
	clusters []policyhubv1.ClusterStatus
}

func (d *applicationPolicy) Object() policyhubv1.Declaration { return d.ApplicationPolicy }
func (d *applicationPolicy) Kind() string                    { return policyhubv1.KindApplicationPolicy }

// RemoveChurn takes the churn out of the per-policy results too.
func (d *applicationPolicy) RemoveChurn(obj policyhubv1.Declaration) {
	ap, ok := obj.(*policyhubv1.ApplicationPolicy)
	if !ok {
		return
	}
	for i := range ap.Status.Policies {
		ap.Status.Policies[i].Results = ap.Status.Policies[i].Results.WithoutChurn()
	}
}

func (d *applicationPolicy) Suspended() bool { return d.Spec.Suspend }
func (d *applicationPolicy) Prune() bool     { return declare.Prune(d.Spec.Prune) }
func (d *applicationPolicy) Copy() engine.Declaration {
	return &applicationPolicy{ApplicationPolicy: d.ApplicationPolicy.DeepCopy(), r: d.r, clusters: d.clusters}
}

func (d *applicationPolicy) Source(hubID string) string {
	return render.ApplicationPolicyOwner(hubID, d.Namespace, d.Name).Source()
}

func (d *applicationPolicy) Render(ctx context.Context) (*engine.Rendering, error) {
	inv, err := placement.ReadInventory(ctx, d.r.Reader, d.r.SecretNamespace)
	if err != nil {
		return nil, fmt.Errorf("read the cluster inventory: %w", err)
	}
	app, err := d.application(ctx)
	if err != nil {
		return nil, err
	}
	grants, err := placement.ReadGrants(ctx, d.r.Reader, d.Namespace)
	if err != nil {
		return nil, err
	}
	t, err := declare.ApplicationPolicyTargets(d.r.HubID, d.ApplicationPolicy, app, inv, grants)
	if err != nil {
		return nil, err
	}
	return &engine.Rendering{Targets: t}, nil
}

// RenderInput: what an ApplicationPolicy renders from besides its spec (the inventory, grants,
// its Application) comes with events.
func (d *applicationPolicy) RenderInput() string { return "" }

// application is its KubeVela Application, when the hub serves them and it names one.
func (d *applicationPolicy) application(ctx context.Context) (*unstructured.Unstructured, error) {
	if !d.r.KubeVela {
		return nil, nil
	}
	return declare.KubeVelaApplication(ctx, d.r.Reader, d.ApplicationPolicy)
}

// SetResults sets this application's results from the clusters' summaries: in each cluster's
// state, and per policy with the top violations in the status.
func (d *applicationPolicy) SetResults(clusters []policyhubv1.ClusterStatus, read engine.SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus {
	clusters = engine.SetClusterResults(clusters, read, owned, now)
	d.Status.Policies, d.Status.TopViolations = applicationResults(d.Spec.Application, clusters, read, owned, now)
	d.clusters = clusters
	return clusters
}

// Progress: an ApplicationPolicy has no rollout; it is in force where its application runs.
func (d *applicationPolicy) Progress(*engine.Rendering, []engine.Outcome, []policyhubv1.ClusterStatus, time.Time) engine.Progress {
	return engine.Progress{}
}

// AfterStatus mirrors the status into the KubeVela Application's status.policy entry, read now
// (the mirror's write is guarded by the Application's resourceVersion).
func (d *applicationPolicy) AfterStatus(ctx context.Context) time.Duration {
	app, err := d.application(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "read the application to mirror the status into")
		return time.Second
	}
	return d.r.mirror(ctx, d.ApplicationPolicy, d.clusters, app)
}
