package engine

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/statusslice"
)

// sliceReread is how long a reconcile that found its cached slices behind waits to read them again.
const sliceReread = 200 * time.Millisecond

// sliceOwner names the declaration's ClusterStatusSlices.
func (e Engine) sliceOwner(d Declaration) statusslice.Owner {
	obj := d.Object()
	ns := obj.GetNamespace()
	if ns == "" {
		ns = e.namespace
	}
	return statusslice.Owner{Kind: d.Kind(), Name: obj.GetName(), UID: string(obj.GetUID()), Namespace: ns}
}

// writeSlices makes the declaration's ClusterStatusSlices hold clusters, writing only the slices
// that change.
func (e Engine) writeSlices(ctx context.Context, d Declaration, clusters []policyhubv1.ClusterStatus, have []policyhubv1.ClusterStatusSlice) error {
	changes := statusslice.Split(e.sliceOwner(d), clusters, have, e.sliceSize)
	return statusslice.Apply(ctx, e.client, d.Object(), policyhubv1.GroupVersion.WithKind(d.Kind()), changes)
}

// sliceWriteFailed is a reconcile's answer to a failed writeSlices: a write refused because the
// cache had not seen the last write of a slice yet (this replica's, or another replica's entries)
// reads the slices again shortly; any other error is returned.
func sliceWriteFailed(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: sliceReread}, nil
	}
	return ctrl.Result{}, err
}

// sliceClusterIndex indexes the cached ClusterStatusSlices by the clusters they hold: a cluster's
// summary wakes the declarations in that cluster, found without walking every declaration.
const sliceClusterIndex = "policyhub.clusters"

// IndexSlices registers sliceClusterIndex with the manager's cache.
func IndexSlices(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &policyhubv1.ClusterStatusSlice{}, sliceClusterIndex, slicedClusters)
}

// slicedClusters are the names of the clusters a ClusterStatusSlice holds.
func slicedClusters(obj client.Object) []string {
	s, ok := obj.(*policyhubv1.ClusterStatusSlice)
	if !ok {
		return nil
	}
	names := make([]string, 0, len(s.Clusters))
	for _, c := range s.Clusters {
		names = append(names, c.Name)
	}
	return names
}

// SlicesOf lists the ClusterStatusSlices holding the cluster (the cache's own objects: they must
// not be changed).
func SlicesOf(ctx context.Context, r client.Reader, cluster string) ([]policyhubv1.ClusterStatusSlice, error) {
	list := &policyhubv1.ClusterStatusSliceList{}
	if err := r.List(ctx, list, client.MatchingFields{sliceClusterIndex: cluster}, ReadOnlyList); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// DeclarationsInCluster are the declarations of kind whose state in the cluster is kept, in
// slices of namespace when one is given (FleetPolicies' are in the hub's).
func DeclarationsInCluster(ctx context.Context, r client.Reader, kind, namespace, cluster string) []reconcile.Request {
	slices, err := SlicesOf(ctx, r, cluster)
	if err != nil {
		log.FromContext(ctx).Error(err, "list the declarations in a cluster", "cluster", cluster)
		return nil
	}
	var reqs []reconcile.Request
	seen := map[reconcile.Request]bool{}
	for _, s := range slices {
		if s.Declaration.Kind != kind || (namespace != "" && s.Namespace != namespace) {
			continue
		}
		req := reconcile.Request{NamespacedName: client.ObjectKey{Name: s.Declaration.Name}}
		if namespace == "" { // a namespaced kind: its slices are in its namespace
			req.Namespace = s.Namespace
		}
		if !seen[req] {
			seen[req] = true
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// SyncedClustersChanged passes a target's slice events that change where its policy is: a
// cluster synced or no longer synced, not the results that move with every summary.
func SyncedClustersChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*policyhubv1.ClusterStatusSlice)
		updated, okNew := e.ObjectNew.(*policyhubv1.ClusterStatusSlice)
		if !okOld || !okNew {
			return true
		}
		return !slices.Equal(declare.SyncedIn(old.Clusters), declare.SyncedIn(updated.Clusters))
	}}
}

// SlicesOfKinds passes the ClusterStatusSlices of declarations of the kinds: a watch of slices
// sees every declaration's, most of them moving with every summary.
func SlicesOfKinds(kinds ...string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		s, ok := o.(*policyhubv1.ClusterStatusSlice)
		return ok && slices.Contains(kinds, s.Declaration.Kind)
	})
}
