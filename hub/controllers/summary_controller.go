package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/metrics"
)

// SummaryReconciler checks the agents' PolicyReportSummaries, exposes the accepted ones as
// metrics and says in each summary's status whether it was accepted, refused or is stale.
// FleetPolicies read the accepted summaries themselves (see FleetPolicyReconciler).
type SummaryReconciler struct {
	Client     client.Client
	Recorder   events.EventRecorder
	Compliance *metrics.Compliance
	// Now is the clock staleness is judged by; nil means time.Now.
	Now func() time.Time
	// MaxConcurrentReconciles bounds the summaries checked at once: a thousand agents push
	// about a hundred a second, and each check writes the summary's status.
	MaxConcurrentReconciles int
}

// SetupWithManager registers the reconciler for PolicyReportSummaries.
func (r *SummaryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&policyhubv1.PolicyReportSummary{}).
		Named("policyreportsummary").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Complete(r)
}

// Reconcile checks one summary.
func (r *SummaryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	s := &policyhubv1.PolicyReportSummary{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		if client.IgnoreNotFound(err) == nil && req.Name == policyhubv1.SummaryName {
			r.Compliance.Forget(req.Namespace) // the cluster's agent is gone: so are its series
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := s.DeepCopy()
	s.Status.ObservedGeneration = s.Generation
	var result ctrl.Result
	ready := metav1.Condition{Type: policyhubv1.ConditionReady, ObservedGeneration: s.Generation}
	var stalled *metav1.Condition
	if err := s.Accepted(); err != nil {
		if s.Name == policyhubv1.SummaryName {
			r.Compliance.Forget(s.Namespace)
		}
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "Refused", err.Error()
		stalled = &metav1.Condition{Status: metav1.ConditionTrue, Reason: "ClusterMismatch", Message: err.Error()}
		if s.Name != policyhubv1.SummaryName {
			stalled.Reason = "UnexpectedName"
		}
	} else {
		r.Compliance.Set(s.Namespace, &s.Spec)
		at := now()
		if aggregate.Stale(&s.Spec, at) {
			ready.Status, ready.Reason = metav1.ConditionFalse, "Stale"
			ready.Message = fmt.Sprintf("no heartbeat from cluster %s's agent for %s (expected every %s); its results are shown as stale",
				s.Namespace, aggregate.Age(&s.Spec, at).Round(time.Second), aggregate.Heartbeat(&s.Spec))
		} else {
			ready.Status, ready.Reason = metav1.ConditionTrue, "Aggregated"
			ready.Message = fmt.Sprintf("aggregated: %d policies, %d fail, %d error", len(s.Spec.Policies), s.Spec.Totals.Fail, s.Spec.Totals.Error)
			// Wake up when it turns stale, unless a heartbeat comes first (which reconciles anyway).
			result.RequeueAfter = aggregate.StaleAt(&s.Spec).Sub(at) + time.Second
		}
	}
	setConditions(&s.Status.Conditions, ready, nil, stalled)
	if equality.Semantic.DeepEqual(orig.Status, s.Status) {
		return result, nil
	}
	if err := r.Client.Status().Patch(ctx, s, client.MergeFrom(orig)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patch status of summary %s/%s: %w", s.Namespace, s.Name, err)
	}
	before := apimeta.FindStatusCondition(orig.Status.Conditions, policyhubv1.ConditionReady)
	if r.Recorder != nil && (before == nil || before.Reason != ready.Reason) && ready.Status != metav1.ConditionTrue {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ready.Reason, "Aggregate", "%s", ready.Message)
	}
	return result, nil
}
