package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/rollout"
)

// FleetPolicyReconciler syncs FleetPolicies into the clusters their placement selects.
type FleetPolicyReconciler struct {
	engine.DeclarationOptions

	// room remembers, per FleetPolicy, its last rendering and the results announced, so that a
	// reconcile woken by an agent's summary or a worker's result renders nothing.
	room engine.Room

	// Rollouts exports the rollouts' state as metrics.
	Rollouts *metrics.Rollout
}

// SetupWithManager registers the reconciler: FleetPolicy spec changes, and changes of the
// inventory (gateway credential Secrets, metadata only), trigger it.
func (r *FleetPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return engine.ControllerFor(mgr, "fleetpolicy", policyhubv1.KindFleetPolicy, &policyhubv1.FleetPolicy{}, &r.DeclarationOptions, &r.room, r.everyFleetPolicy, r.fleetPoliciesInCluster, r.fleetPoliciesOfPlacement).
		// Where its exceptions are in force marks its namespaced CEL policies (markExceptionsInForce).
		Watches(&policyhubv1.ClusterStatusSlice{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(ofExceptionSlice(r.Reader, policyhubv1.KindFleetPolicy, r.everyFleetPolicy))),
			builder.WithPredicates(engine.SlicesOfKinds(policyhubv1.KindFleetPolicyException), engine.SyncedClustersChanged())).
		Complete(r)
}

func (r *FleetPolicyReconciler) everyFleetPolicy(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &policyhubv1.FleetPolicyList{}
	if err := r.Client.List(ctx, list, engine.ReadOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "list FleetPolicies after an inventory change")
		return nil
	}
	return engine.RequestsFor[policyhubv1.FleetPolicy](list.Items, nil)
}

// fleetPoliciesOfPlacement maps an OCM Placement or PlacementDecision to the FleetPolicies whose
// placementRef names the Placement.
func (r *FleetPolicyReconciler) fleetPoliciesOfPlacement(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &policyhubv1.FleetPolicyList{}
	if err := r.Client.List(ctx, list, engine.ReadOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "list FleetPolicies after an OCM placement change")
		return nil
	}
	key := placement.PlacementOf(obj)
	return engine.RequestsFor(list.Items, func(fp *policyhubv1.FleetPolicy) bool { return placement.Names(&fp.Spec.Placement, "", key) })
}

// fleetPoliciesInCluster maps a cluster's summary to the FleetPolicies whose slices (in the hub's
// namespace) hold the cluster: their results come from it.
func (r *FleetPolicyReconciler) fleetPoliciesInCluster(ctx context.Context, summary client.Object) []reconcile.Request {
	return engine.DeclarationsInCluster(ctx, r.Reader, policyhubv1.KindFleetPolicy, r.Namespace, summary.GetNamespace())
}

// Reconcile runs placement → render → sync for one FleetPolicy and records the outcome.
func (r *FleetPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fp := &policyhubv1.FleetPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, fp); err != nil {
		if apierrors.IsNotFound(err) {
			r.room.Forget(req.NamespacedName)
			if r.Rollouts != nil {
				r.Rollouts.Delete(req.Name)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.Engine(&r.room).Reconcile(ctx, req.NamespacedName, &fleetPolicy{FleetPolicy: fp, r: r})
}

// fleetPolicy is a FleetPolicy as the engine's declaration.
type fleetPolicy struct {
	*policyhubv1.FleetPolicy
	r *FleetPolicyReconciler
	// transitions are the Events of this reconcile's rollout step, recorded once the status is
	// written.
	transitions []rolloutEvent
	// legacy are the Kyverno legacy objects of the clusters whose summaries this reconcile read
	// (a rollout gate's maxLegacyObjects).
	legacy map[string]*int64
}

func (d *fleetPolicy) Object() policyhubv1.Declaration { return d.FleetPolicy }
func (d *fleetPolicy) Kind() string                    { return policyhubv1.KindFleetPolicy }
func (d *fleetPolicy) Suspended() bool                 { return d.Spec.Suspend }
func (d *fleetPolicy) Prune() bool                     { return declare.Prune(d.Spec.Prune) }
func (d *fleetPolicy) Copy() engine.Declaration {
	return &fleetPolicy{FleetPolicy: d.FleetPolicy.DeepCopy(), r: d.r, transitions: d.transitions}
}

func (d *fleetPolicy) Source(hubID string) string {
	return render.FleetPolicyOwner(hubID, d.Name).Source()
}

func (d *fleetPolicy) Render(ctx context.Context) (*engine.Rendering, error) {
	inv, err := placement.ReadInventory(ctx, d.r.Reader, d.r.SecretNamespace)
	if err != nil {
		return nil, fmt.Errorf("read the cluster inventory: %w", err)
	}
	t, plan, err := declare.FleetPolicyTargets(d.r.HubID, d.FleetPolicy, inv)
	if err != nil {
		return nil, err
	}
	if err := declare.MarkExceptionsInForce(ctx, d.r.Reader, policyhubv1.KindFleetPolicy, d.Name, declare.FleetPolicyExceptedRef(d.FleetPolicy), t); err != nil {
		return nil, err
	}
	return &engine.Rendering{Targets: t, Rollout: plan}, nil
}

// RenderInput is the rollout's state, when it rolls out: the plan, and so what each wave's
// clusters get, follows the waves' phases.
func (d *fleetPolicy) RenderInput() string {
	if d.Spec.Rollout == nil || d.Status.Rollout == nil {
		return ""
	}
	state, err := json.Marshal(d.Status.Rollout)
	if err != nil {
		return fmt.Sprint(d.Status.Rollout) // never for a status read from the API
	}
	return string(state)
}

func (d *fleetPolicy) Progress(r *engine.Rendering, outcomes []engine.Outcome, clusters []policyhubv1.ClusterStatus, now time.Time) engine.Progress {
	d.Status.Preview = previewStatus(d.FleetPolicy, r.Rollout, clusters, d.Status.Preview, now)
	return d.progressRollout(r.Rollout, outcomes, clusters, now)
}

func (d *fleetPolicy) SetResults(clusters []policyhubv1.ClusterStatus, read engine.SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus {
	d.legacy = legacyCounts(read)
	clusters = engine.SetClusterResults(clusters, read, owned, now)
	recordLegacy(clusters, read, d.legacy, d.Spec.Rollout.GatesOnLegacyObjects())
	return clusters
}

func (d *fleetPolicy) AfterStatus(context.Context) time.Duration {
	announceRollout(d.r.Recorder, d.FleetPolicy, d.transitions)
	if d.r.Rollouts != nil {
		d.r.Rollouts.Set(d.Name, d.Status.Rollout)
	}
	return 0
}

// progressRollout makes one step of the rollout plan (nil: none) from the clusters' outcomes and
// state (the engine judges their reports fresh or not), and records the new state in the status.
func (d *fleetPolicy) progressRollout(plan *rollout.Plan, outcomes []engine.Outcome, clusters []policyhubv1.ClusterStatus, now time.Time) engine.Progress {
	if plan == nil {
		d.Status.Rollout = nil
		return engine.Progress{}
	}
	step := stepRollout(plan, outcomes, clusters, d.legacy, previewMeasure(d.Status.Preview, plan.Revision), now, d.GetAnnotations(), d.Spec.Rollout.Paused, d.Status.Rollout,
		func() *policyhubv1.StableVersion {
			return &policyhubv1.StableVersion{Revision: plan.Revision, Template: d.Spec.Template.DeepCopy()}
		})
	d.transitions, d.Status.Rollout = step.transitions, step.status
	return step.progress
}
