package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

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

// slicesOf lists the ClusterStatusSlices holding the cluster (the cache's own objects: they must
// not be changed).
func slicesOf(ctx context.Context, r client.Reader, cluster string) ([]policyhubv1.ClusterStatusSlice, error) {
	list := &policyhubv1.ClusterStatusSliceList{}
	if err := r.List(ctx, list, client.MatchingFields{sliceClusterIndex: cluster}, ReadOnlyList); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// DeclarationsInCluster are the declarations of kind whose state in the cluster is kept, in
// slices of namespace when one is given (FleetPolicies' are in the hub's).
func DeclarationsInCluster(ctx context.Context, r client.Reader, kind, namespace, cluster string) []reconcile.Request {
	slices, err := slicesOf(ctx, r, cluster)
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
