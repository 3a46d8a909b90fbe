package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/metrics"
)

// SummaryReconciler checks the agents' PolicyReportSummaries, exposes the accepted ones as
// metrics and says in each summary's status whether it was accepted, refused or is stale.
// FleetPolicies read the accepted summaries themselves (see FleetPolicyReconciler).
type SummaryReconciler struct {
	Client     client.Client
	Recorder   events.EventRecorder
	Compliance *metrics.Compliance
	// Heard is when the hub last saw each cluster's agent renew its Lease: liveness, which keeps
	// a summary fresh without the agent rewriting it. Nil: only summaries count.
	Heard *heartbeat.Heard
	// Now is the clock staleness is judged by; nil means time.Now.
	Now func() time.Time
	// MaxConcurrentReconciles bounds the summaries checked at once: a thousand agents push
	// about a hundred a second, and each check writes the summary's status.
	MaxConcurrentReconciles int
	// Works says whether this replica works the cluster (hub replicas share the fleet): only
	// the cluster's replica judges its summary and exports its series. Nil: every cluster.
	Works func(cluster string) bool
	// Wake, when set, is a source of summaries to check again (the clusters moved between
	// replicas).
	Wake source.Source
	// Engines, when set, takes each accepted summary's engine facts (the workers act on them).
	Engines *EngineFacts
	// Pacer, when set, gives the pacing every summary's status publishes to its agent; when
	// the pacing changes it wakes every summary (through Wake) so quiet agents learn it. Nil:
	// the hub publishes none (see publishPacing).
	Pacer *Pacer
}

// SetupWithManager registers the reconciler for PolicyReportSummaries.
func (r *SummaryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Heard == nil {
		r.Heard = heartbeat.New(r.Now)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Wake != nil {
		b = b.WatchesRawSource(r.Wake)
	}
	return b.
		For(&policyhubv1.PolicyReportSummary{}).
		// A renewal enqueues the cluster's summary; its status changes only when the verdict
		// does (Stale back to Aggregated), so a quiet agent's renewals write nothing.
		Watches(&coordinationv1.Lease{}, r.Heard.Handler()).
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
	if r.Works != nil && !r.Works(req.Namespace) {
		r.forget(req.Namespace) // another replica's cluster: its series are there
		return ctrl.Result{}, nil
	}
	s := &policyhubv1.PolicyReportSummary{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		if client.IgnoreNotFound(err) == nil && req.Name == policyhubv1.SummaryName {
			r.forget(req.Namespace) // the cluster's agent is gone: so are its series
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := s.DeepCopy()
	// Set before the verdict: an agent told a longer heartbeat is judged by it.
	var pacing *policyhubv1.SummaryPacing
	if r.Pacer != nil {
		current, err := r.Pacer.Current(ctx)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("pacing of summary %s/%s: %w", s.Namespace, s.Name, err)
		}
		pacing = &current
	}
	publishPacing(s, pacing)
	v := judgeSummary(s, r.Heard.At(s.Namespace), now())
	switch {
	case v.accepted:
		r.Compliance.Set(s.Namespace, s)
		if r.Engines != nil {
			r.Engines.Set(s.Namespace, &s.Spec)
		}
	case s.Name == policyhubv1.SummaryName:
		r.forget(s.Namespace)
	}
	result := ctrl.Result{RequeueAfter: v.requeueAfter}
	if equality.Semantic.DeepEqual(orig.Status, s.Status) {
		return result, nil
	}
	// Optimistically locked: the verdict is of the summary as this hub read it, and a hub whose
	// cache lags (a replica taking the cluster over) must not replace a newer status, such as
	// when the hub first saw the generation. The newer one's update reconciles it again.
	if err := r.Client.Status().Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return result, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch status of summary %s/%s: %w", s.Namespace, s.Name, err)
	}
	before := apimeta.FindStatusCondition(orig.Status.Conditions, policyhubv1.ConditionReady)
	ready := apimeta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady)
	if r.Recorder != nil && (before == nil || before.Reason != ready.Reason) && ready.Status != metav1.ConditionTrue {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ready.Reason, "Aggregate", "%s", ready.Message)
	}
	return result, nil
}

// forget drops what the hub keeps of the cluster's summary: its series and its engine facts.
func (r *SummaryReconciler) forget(cluster string) {
	r.Compliance.Forget(cluster)
	if r.Engines != nil {
		r.Engines.Forget(cluster)
	}
}

// verdict is what the hub makes of a summary.
type verdict struct {
	// accepted: the summary is aggregated.
	accepted bool
	// requeueAfter is when to look again: when accepted results turn stale (zero: no need).
	requeueAfter time.Duration
}

// judgeSummary records the hub's verdict at now, given when the hub last heard the cluster's
// agent renew its Lease (heard; zero: not heard), in the summary's status: when the hub first saw
// its generation (by the hub's clock, the one freshness is judged by), whether it is aggregated
// (Ready, or Stalled with the reason), and whether the cluster's clock is off (ClockSkew).
func judgeSummary(s *policyhubv1.PolicyReportSummary, heard, now time.Time) verdict {
	observe(s, now)
	var v verdict
	ready := metav1.Condition{Type: policyhubv1.ConditionReady, ObservedGeneration: s.Generation}
	var stalled *metav1.Condition
	refuse := func(reason string, err error) {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "Refused", err.Error()
		stalled = &metav1.Condition{Status: metav1.ConditionTrue, Reason: reason, Message: err.Error()}
	}
	if err := s.Accepted(); err != nil {
		refuse("ClusterMismatch", err)
		if s.Name != policyhubv1.SummaryName {
			stalled.Reason = "UnexpectedName"
		}
	} else if err := s.Spec.Validate(); err != nil {
		refuse(engine.ReasonInvalid, fmt.Errorf("the summary holds what the PolicyReportSummary CRD refuses (is the hub's CRD older than the hub?), so it is not aggregated: %w", err))
		ready.Reason = engine.ReasonInvalid
	} else {
		v.accepted = true
		if aggregate.Stale(s, heard, now) {
			ready.Status, ready.Reason = metav1.ConditionFalse, policyhubv1.ReasonStale
			// The message names when, not how long ago: it stays the same while the agent is
			// silent, so looking again writes nothing.
			last := "never"
			if at := aggregate.LastHeard(s, heard, now); !at.IsZero() {
				last = "since " + at.UTC().Format(time.RFC3339)
			}
			ready.Message = fmt.Sprintf("no heartbeat from cluster %s's agent %s (its Lease %s is renewed every %s); its results are shown as stale",
				s.Namespace, last, policyhubv1.AgentLeaseName, aggregate.Heartbeat(s))
		} else {
			ready.Status, ready.Reason = metav1.ConditionTrue, "Aggregated"
			ready.Message = fmt.Sprintf("aggregated: %d policies, %d fail, %d error", len(s.Spec.Policies), s.Spec.Totals.Fail, s.Spec.Totals.Error)
			// Wake up when it turns stale, unless a renewal comes first (which reconciles anyway).
			v.requeueAfter = aggregate.StaleAt(s, heard, now).Sub(now) + time.Second
		}
	}
	engine.SetConditions(&s.Status.Conditions, ready, nil, stalled)
	return v
}

// observe records when the hub saw the summary's generation. A new generation is seen now, by
// the hub's clock, and the cluster's clock is measured against it (ClockSkew). A generation seen
// by a hub that did not record when (an older version) gets the agent's generatedAt, never
// later than now, and its clock is not judged: the summary may have waited long before.
func observe(s *policyhubv1.PolicyReportSummary, now time.Time) {
	if s.Status.ObservedGeneration == s.Generation && s.Status.ObservedTime != nil {
		return
	}
	if s.Status.ObservedGeneration == s.Generation {
		if at, _ := aggregate.ObservedAt(s, now); !at.IsZero() {
			s.Status.ObservedTime = &metav1.MicroTime{Time: at}
		}
		return
	}
	s.Status.ObservedGeneration = s.Generation
	s.Status.ObservedTime = &metav1.MicroTime{Time: now}
	skew, ok := aggregate.ClockOffset(s)
	if !ok {
		apimeta.RemoveStatusCondition(&s.Status.Conditions, policyhubv1.ConditionClockSkew)
		return
	}
	apimeta.SetStatusCondition(&s.Status.Conditions, clockSkewCondition(skew, aggregate.ClockSkewLimit(s), s.Generation))
}

// clockSkewCondition says whether the cluster's clock, skew ahead of the hub's (negative:
// behind), is off by more than limit. It is information, not a verdict: the summary stays Ready,
// since freshness is judged by the hub's clock; only Kyverno's result times, which a rollout
// translates by the skew, are less exact for it.
func clockSkewCondition(skew, limit time.Duration, generation int64) metav1.Condition {
	c := metav1.Condition{Type: policyhubv1.ConditionClockSkew, ObservedGeneration: generation}
	way := "ahead of"
	if skew < 0 {
		way = "behind"
	}
	measured := fmt.Sprintf("spec.generatedAt is %s %s the hub's clock when the hub saw the summary", skew.Abs().Round(time.Millisecond), way)
	if skew.Abs() > limit {
		c.Status, c.Reason = metav1.ConditionTrue, "ClockAhead"
		if skew < 0 {
			c.Reason = "ClockBehind"
		}
		c.Message = fmt.Sprintf("%s (at most %s expected): the cluster's clock is off; fix its time sync. The hub judges freshness by its own clock", measured, limit)
		return c
	}
	c.Status, c.Reason, c.Message = metav1.ConditionFalse, "ClockInSync", fmt.Sprintf("%s (at most %s expected)", measured, limit)
	return c
}
