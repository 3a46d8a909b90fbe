package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/statusslice"
)

// Reconcile keeps the finalizer, or lets a deleted declaration go (finalize); a suspended one
// only says so. Otherwise the dispatch half hands the clusters what the declaration wants, and
// the status half writes what they answered.
func (e Engine) Reconcile(ctx context.Context, key types.NamespacedName, d Declaration) (result ctrl.Result, err error) {
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
	// The phases below set the status; it is written once, as the reconcile ends.
	status := newStatusPatch(e.client, d)
	defer func() { result, err = status.finish(ctx, result, err) }()
	st := d.Object().DeclarationStatus()
	if lifecycle == declare.Keep {
		// Nothing is synced or pruned; the status says so, keeping the clusters' last state.
		ready := metav1.ConditionTrue
		if c := meta.FindStatusCondition(*st.Conditions, policyhubv1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			ready = c.Status
		}
		*st.ObservedGeneration = obj.GetGeneration()
		SetConditions(st.Conditions, metav1.Condition{
			Type: policyhubv1.ConditionReady, Status: ready, Reason: "Suspended", ObservedGeneration: obj.GetGeneration(),
			Message: why,
		}, nil, nil)
		status.write(nil)
		return ctrl.Result{}, nil
	}

	owner := e.sliceOwner(d)
	before, have, err := statusslice.Read(ctx, e.reader, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	sent, err := e.dispatchHalf(ctx, key, d, before)
	if invalid, ok := render.AsInvalid(err); ok {
		return e.stalled(d, status, invalid.Reason, invalid.Err), nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return e.statusHalf(ctx, key, d, status, sent, before, have)
}

// stalled records a declaration that cannot be dispatched until the user changes it; nothing
// is sent to any cluster.
func (e Engine) stalled(d Declaration, status *statusPatch, reason string, cause error) ctrl.Result {
	msg := policyhubv1.TruncateMessage(cause.Error(), 1024)
	obj := d.Object()
	st := d.Object().DeclarationStatus()
	*st.ObservedGeneration = obj.GetGeneration()

	SetConditions(st.Conditions,
		metav1.Condition{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()},
		nil, &metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	status.write(func(context.Context) ctrl.Result {
		if meta.FindStatusCondition(*status.orig.Object().DeclarationStatus().Conditions, policyhubv1.ConditionStalled) == nil {
			e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "nothing was dispatched: %s", msg)
		}
		// Retrying cannot help: the next spec change triggers a reconcile.
		return ctrl.Result{}
	})
	return ctrl.Result{}
}

// Finalizer keeps a declaration until its policies are pruned from every cluster.
const Finalizer = "policyhub.io/prune"

// finalize prunes the declaration's policies from every cluster it was synced to, then lets it
// go. A cluster that cannot be pruned keeps the finalizer, and the status says which and why;
// its worker retries, and its results wake this reconcile.
func (e Engine) finalize(ctx context.Context, key types.NamespacedName, d Declaration, source string) (result ctrl.Result, err error) {
	obj := d.Object()
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	status := newStatusPatch(e.client, d)
	defer func() { result, err = status.finish(ctx, result, err) }()
	st := d.Object().DeclarationStatus()
	owner := e.sliceOwner(d)
	before, have, err := statusslice.Read(ctx, e.reader, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	sh := e.shareOf(d)
	var clusters []string
	for _, c := range before {
		clusters = append(clusters, c.Name)
	}
	if len(have) == 0 && st.Summary.Clusters > 0 && d.Prune() {
		// Its status counts clusters but no slice names them: written by a hub before the slices
		// (or the cache has not seen them yet). Where it was synced is unknown, so every cluster
		// of the fleet is asked to prune it: a cluster without its objects has nothing to do.
		if clusters, err = e.fleetClusters(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Each replica prunes the clusters it works; the others' entries stay until their owners
	// prune them and remove them.
	clusters = sh.ownedNames(clusters)
	others := sh.others(before)
	if d.Prune() {
		// A cluster that left the fleet (its credential Secret is gone) cannot be reached to prune:
		// waiting for it would hold the finalizer (and the namespace of an ApplicationPolicy) forever.
		left, err := e.leftFleet(ctx, clusters)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(left) > 0 {
			clusters = slices.DeleteFunc(clusters, func(c string) bool { return slices.Contains(left, c) })
			e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "NotPruned", "Delete",
				"not pruned from %s: left the fleet (no cluster-gateway credential Secret in %s), so its policies there could not be removed and are no longer managed by this hub",
				strings.Join(left, ", "), e.secretNamespace)
			for _, c := range left {
				e.dispatch.workers.Drop(c, source)
			}
		}
		var stuck []Outcome
		pending := 0
		for _, o := range e.dispatch.want(pruneWants(source, clusters)) {
			switch {
			case o.Pending:
				pending++
			case o.Result.Phase != policyhubv1.ClusterPhaseSynced:
				o.Result.Message = "deleting: could not prune this cluster yet: " + o.Result.Message
				stuck = append(stuck, o)
			}
		}
		if len(stuck) > 0 {
			if err := e.writeSlices(ctx, d, withOthers(clusterStatuses(before, stuck, nil, metav1.Now()), others), have); err != nil {
				return sliceWriteFailed(err)
			}
			if !sh.writes {
				return ctrl.Result{}, nil
			}
			SetConditions(st.Conditions, metav1.Condition{
				Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "PruneFailed", ObservedGeneration: obj.GetGeneration(),
				Message: fmt.Sprintf("deleting: %d clusters still hold its policies and could not be pruned; the finalizer stays until they are", len(stuck)),
			}, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Pruning", Message: "the clusters' workers retry the prune with backoff"}, nil)
			status.write(func(context.Context) ctrl.Result {
				if c := meta.FindStatusCondition(*status.orig.Object().DeclarationStatus().Conditions, policyhubv1.ConditionReady); c == nil || c.Reason != "PruneFailed" {
					e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "PruneFailed", "Delete", "could not prune %s: %s", stuck[0].Cluster, stuck[0].Result.Message)
				}
				return ctrl.Result{}
			})
			return ctrl.Result{}, nil
		}
		if pending > 0 {
			return ctrl.Result{}, nil // the workers' results wake this reconcile
		}
	}
	if len(others) > 0 || !sh.writes {
		// This replica's clusters are let go of; the declaration's writer lets it go once no
		// other replica's cluster is left (their slices wake it).
		if err := e.writeSlices(ctx, d, others, have); err != nil {
			return sliceWriteFailed(err)
		}
		for _, c := range clusters {
			e.dispatch.workers.Drop(c, source)
		}
		return ctrl.Result{}, nil
	}
	// No garbage collector need run on the hub: the slices go with the declaration.
	if err := statusslice.Apply(ctx, e.client, obj, schema.GroupVersionKind{}, statusslice.Changes{Delete: have}); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFrom(d.Copy().Object())
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := e.client.Patch(ctx, obj, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	for _, c := range clusters {
		e.dispatch.workers.Drop(c, source)
	}
	e.room.Forget(key)
	return ctrl.Result{}, nil
}

// fleetClusters are the clusters that have a cluster-gateway credential Secret.
func (e Engine) fleetClusters(ctx context.Context) ([]string, error) {
	secrets, err := placement.CredentialSecrets(ctx, e.reader, e.secretNamespace)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(secrets))
	for _, s := range secrets {
		names = append(names, s.Name)
	}
	return names, nil
}

// leftFleet are the clusters that no longer have a cluster-gateway credential Secret.
func (e Engine) leftFleet(ctx context.Context, clusters []string) ([]string, error) {
	if len(clusters) == 0 {
		return nil, nil
	}
	fleet, err := e.fleetClusters(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, name := range fleet {
		known[name] = true
	}
	var left []string
	for _, c := range clusters {
		if !known[c] {
			left = append(left, c)
		}
	}
	return left, nil
}
