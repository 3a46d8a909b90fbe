package controllers

import (
	"context"
	"slices"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/work"
)

// kindSummary names the summary controller's queue in ResultEvents.
const kindSummary = "PolicyReportSummary"

// handover follows this replica's share of the fleet as it changes: the workers of the clusters
// it no longer works stop (each gives up the cluster's sync Lease once its pass in progress
// ends, so the new owner, which must take that Lease to write, starts only after) and their
// sync series go (the new owner exports them: a stale "unreachable" here would alert), and every
// declaration and summary is looked at again, handing the clusters it now works their work.
type handover struct {
	// kinds are the declaration kinds the hub runs: every declaration of each is woken.
	kinds  engine.Registry
	reader client.Reader
	// summaryMetas reads every summary's metadata (SummaryLabeler's cache).
	summaryMetas client.Reader
	workers      *work.Workers
	results      *engine.ResultEvents
	shard        *shard.Sharder
	metrics      *metrics.Replica
	// sync holds the per-cluster sync series: a cluster handed over takes its series with it.
	sync *metrics.Sync

	mu    sync.Mutex
	owned map[string]bool
	// last is the assignment moved last took in.
	last shard.Assignment
}

// moved takes in a new assignment.
func (h *handover) moved(ctx context.Context, a shard.Assignment) {
	me := h.shard.Name()
	owned := map[string]bool{}
	for _, c := range a.Owned(me) {
		owned[c] = true
	}
	h.mu.Lock()
	in, out := 0, 0
	for c := range owned {
		if !h.owned[c] {
			in++
		}
	}
	for c := range h.owned {
		if !owned[c] {
			out++
		}
	}
	h.owned = owned
	inherited := shard.Inherited(h.last, a, me)
	h.last = a
	h.mu.Unlock()
	// Clusters of a replica that died go first: their changes are late already.
	h.workers.Inherit(inherited...)
	h.metrics.Set(len(owned), a.Clusters(), len(a.Replicas()), in, out)
	log.FromContext(ctx).Info("this replica's share of the fleet changed", "replica", me, "replicas", a.Replicas(), "clusters", len(owned), "in", in, "out", out, "inherited", len(inherited))
	for _, c := range h.workers.Clusters() {
		if !h.shard.Works(c) {
			go func() {
				h.workers.Forget(c) // waits for its pass in progress, which may still record series
				h.sync.ForgetCluster(c)
			}()
		}
	}
	h.wakeAll(ctx, inherited)
}

// wakeAll enqueues every declaration and summary the cache holds; the summaries of the clusters
// inherited from a replica that died go first, so their results are labelled, cached and judged
// ahead of the clusters that merely moved (the queues are first in, first out).
func (h *handover) wakeAll(ctx context.Context, inherited []string) {
	wake := func(kind string, list client.ObjectList, keys func() []types.NamespacedName) {
		reader := h.reader
		if kind == kindSummaryLabel {
			reader = h.summaryMetas
		}
		if err := reader.List(ctx, list, engine.ReadOnlyList); err != nil {
			log.FromContext(ctx).Error(err, "list after the replicas' shares changed", "kind", kind)
			return
		}
		h.results.Wake(kind, keys()...)
	}
	for _, k := range h.kinds {
		list := k.NewList()
		wake(k.Kind, list, func() []types.NamespacedName { return keysOfList(list) })
	}
	summaries := &policyhubv1.PolicyReportSummaryList{}
	wake(kindSummary, summaries, func() []types.NamespacedName { return inheritedFirst(keysOf(summaries.Items), inherited) })
	// Every cluster's summary, by its metadata: those of the clusters this replica now works
	// are labelled for it (SummaryLabeler), and so enter its cache.
	metas := &metav1.PartialObjectMetadataList{}
	metas.SetGroupVersionKind(policyhubv1.GroupVersion.WithKind(kindSummary + "List"))
	wake(kindSummaryLabel, metas, func() []types.NamespacedName { return inheritedFirst(keysOf(metas.Items), inherited) })
}

// inheritedFirst orders the keys of per-cluster objects (namespace = cluster) so that those of
// the inherited clusters come first, each part in its former order.
func inheritedFirst(keys []types.NamespacedName, inherited []string) []types.NamespacedName {
	if len(inherited) == 0 {
		return keys
	}
	first := make(map[string]bool, len(inherited))
	for _, c := range inherited {
		first[c] = true
	}
	slices.SortStableFunc(keys, func(a, b types.NamespacedName) int {
		switch {
		case first[a.Namespace] == first[b.Namespace]:
			return 0
		case first[a.Namespace]:
			return -1
		default:
			return 1
		}
	})
	return keys
}

// keysOf are the keys of items.
func keysOf[T any, P interface {
	*T
	client.Object
}](items []T) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(items))
	for i := range items {
		keys = append(keys, client.ObjectKeyFromObject(P(&items[i])))
	}
	return keys
}

// keysOfList are the keys of a list's items.
func keysOfList(list client.ObjectList) []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, apimeta.LenList(list))
	_ = apimeta.EachListItem(list, func(obj runtime.Object) error {
		if o, ok := obj.(client.Object); ok {
			keys = append(keys, client.ObjectKeyFromObject(o))
		}
		return nil
	})
	return keys
}
