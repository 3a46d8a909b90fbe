package statusslice

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Read lists a declaration's slices in owner.Namespace (from the hub's cache, for the hub) and
// joins their clusters. Only the declaration's own slices count (ClusterStatusSlice.Of).
func Read(ctx context.Context, r client.Reader, owner Owner) ([]policyhubv1.ClusterStatus, []policyhubv1.ClusterStatusSlice, error) {
	list := &policyhubv1.ClusterStatusSliceList{}
	if err := r.List(ctx, list, client.InNamespace(owner.Namespace), client.MatchingLabels{policyhubv1.LabelDeclarationUID: owner.UID}); err != nil {
		return nil, nil, fmt.Errorf("list the ClusterStatusSlices of %s %s: %w", owner.Kind, owner.Name, err)
	}
	own := slices.DeleteFunc(list.Items, func(s policyhubv1.ClusterStatusSlice) bool {
		return !s.Of(owner.Kind, owner.Name, types.UID(owner.UID))
	})
	return policyhubv1.JoinClusterStatusSlices(own), own, nil
}

// Apply makes the changes, each slice owned by the declaration (controller reference; without a
// garbage collector, Delete removes them). An update is conditional on the slice's
// resourceVersion as read: a stale read fails with a conflict, and the declaration's next
// reconcile reads again.
func Apply(ctx context.Context, c client.Client, owner client.Object, gvk schema.GroupVersionKind, changes Changes) error {
	for i := range changes.Write {
		s := &changes.Write[i]
		s.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
		}}
		s.ManagedFields = nil
		var err error
		if s.ResourceVersion == "" {
			err = c.Create(ctx, s)
		} else {
			err = c.Update(ctx, s)
		}
		if err != nil {
			return fmt.Errorf("write ClusterStatusSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	for i := range changes.Delete {
		if err := c.Delete(ctx, &changes.Delete[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ClusterStatusSlice %s/%s: %w", changes.Delete[i].Namespace, changes.Delete[i].Name, err)
		}
	}
	return nil
}
