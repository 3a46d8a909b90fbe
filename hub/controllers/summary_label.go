package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
)

// kindSummaryLabel names the summary labeller's queue in ResultEvents.
const kindSummaryLabel = "PolicyReportSummaryLabel"

// SummaryLabeler labels the summaries of the clusters this replica works as worked by it
// (policyhubv1.LabelWorkedBy), when the hub's replicas share the fleet: each replica's manager
// caches only the summaries labelled with its name (CacheOptions), so a cluster's summary follows
// the cluster from replica to replica. It reads every summary's metadata, from a cache of its own
// (Metas, see NewSummaryMetas). The agent writes only its summary's spec, so the label it finds
// stays; an agent that changed it is answered by a label put back.
type SummaryLabeler struct {
	Client client.Client
	// Metas is the cache of every summary's metadata.
	Metas cache.Cache
	// Replica is this replica's name.
	Replica string
	// Works says whether this replica works the cluster.
	Works func(cluster string) bool
	// Wake is a source of summaries to look at again (the clusters moved between replicas).
	Wake source.Source
}

// NewSummaryMetas makes, and adds to the manager, a cache of every PolicyReportSummary's
// metadata (a few hundred bytes each: what keepSummaryMeta keeps). It is a cache of its own: the
// manager's holds the whole summaries of this replica's clusters, and a cache has one selection
// per kind.
func NewSummaryMetas(mgr ctrl.Manager) (cache.Cache, error) {
	o := summaryMetasOptions()
	o.Scheme, o.Mapper, o.HTTPClient = mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient()
	c, err := cache.New(mgr.GetConfig(), o)
	if err != nil {
		return nil, fmt.Errorf("cache of the summaries' metadata: %w", err)
	}
	if err := mgr.Add(everyReplica{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// summaryMetasOptions select every summary the hub reads (by name), and keep of each only the
// metadata the labeller reads.
func summaryMetasOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		engine.SummaryMeta(): {Field: fields.OneTermEqualSelector("metadata.name", policyhubv1.SummaryName), Transform: keepSummaryMeta},
	}}
}

// everyReplica runs a cache in every replica, leader or not.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

// SetupWithManager registers the labeller.
func (r *SummaryLabeler) SetupWithManager(mgr ctrl.Manager) error {
	// A summary is looked at when it appears and when its label changes (and on handover,
	// Wake): an agent's pushes, thousands a minute in a large fleet, change neither.
	labelChanged := predicate.TypedFuncs[*metav1.PartialObjectMetadata]{UpdateFunc: func(e event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool {
		return e.ObjectOld.GetLabels()[policyhubv1.LabelWorkedBy] != e.ObjectNew.GetLabels()[policyhubv1.LabelWorkedBy]
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("policyreportsummary-label").
		WatchesRawSource(r.Wake).
		WatchesRawSource(source.Kind(r.Metas, engine.SummaryMeta(), &handler.TypedEnqueueRequestForObject[*metav1.PartialObjectMetadata]{}, labelChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// Reconcile labels one summary as worked by this replica, when it works its cluster and the
// summary does not say so yet.
func (r *SummaryLabeler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != policyhubv1.SummaryName || !r.Works(req.Namespace) {
		return ctrl.Result{}, nil
	}
	m := engine.SummaryMeta()
	if err := r.Metas.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if m.GetLabels()[policyhubv1.LabelWorkedBy] == r.Replica {
		return ctrl.Result{}, nil
	}
	patch := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, Labels: map[string]string{policyhubv1.LabelWorkedBy: r.Replica},
	}}
	if err := client.IgnoreNotFound(r.Client.Patch(ctx, patch, client.Merge)); err != nil {
		return ctrl.Result{}, fmt.Errorf("label summary %s/%s as worked by %s: %w", m.Namespace, m.Name, r.Replica, err)
	}
	return ctrl.Result{}, nil
}
