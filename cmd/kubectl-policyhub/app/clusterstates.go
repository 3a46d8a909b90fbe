package app

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// slicePage is how many ClusterStatusSlices one list request asks for: at 10,000 clusters a
// declaration has a hundred slices of ~16 KiB, so a request stays near a megabyte.
const slicePage = 50

// clusterStates reads a declaration's state in each of its clusters from its ClusterStatusSlices,
// in pages: an ApplicationPolicy's in its namespace; a FleetPolicy's (cluster-scoped, its slices
// in the hub's namespace) in any namespace, only those it owns.
func clusterStates(ctx context.Context, c client.Reader, decl client.Object, kind string) ([]policyhubv1.ClusterStatus, error) {
	var slices []policyhubv1.ClusterStatusSlice
	opts := []client.ListOption{client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(decl.GetUID())}, client.Limit(slicePage)}
	if decl.GetNamespace() != "" {
		opts = append(opts, client.InNamespace(decl.GetNamespace()))
	}
	for cont := ""; ; {
		list := &policyhubv1.ClusterStatusSliceList{}
		if err := c.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
			if isMissingCRD(err) || meta.IsNoMatchError(err) {
				return nil, nil // a hub older than the slices: nothing to show per cluster
			}
			return nil, fmt.Errorf("list the ClusterStatusSlices of %s %s: %w", kind, decl.GetName(), err)
		}
		for _, s := range list.Items {
			if s.Of(kind, decl.GetName(), decl.GetUID()) {
				slices = append(slices, s)
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	return policyhubv1.JoinClusterStatusSlices(slices), nil
}
