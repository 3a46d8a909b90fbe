package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A slice is a declaration's only when it names it and the declaration is its controller: a
// slice carrying the uid label alone (written by someone else) never speaks for it.
func TestClusterStatusSliceOfItsDeclarationOnly(t *testing.T) {
	const uid = types.UID("1234")
	slice := func(mutate func(*ClusterStatusSlice)) *ClusterStatusSlice {
		s := &ClusterStatusSlice{
			ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
				{APIVersion: GroupVersion.String(), Kind: KindFleetPolicy, Name: "fp", UID: uid, Controller: ptr.To(true)},
			}},
			Declaration: DeclarationRef{Kind: KindFleetPolicy, Name: "fp", UID: string(uid)},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		slice *ClusterStatusSlice
		want  bool
	}{
		{"its own", slice(nil), true},
		{"no owner", slice(func(s *ClusterStatusSlice) { s.OwnerReferences = nil }), false},
		{"owned, not as controller", slice(func(s *ClusterStatusSlice) { s.OwnerReferences[0].Controller = nil }), false},
		{"controlled by another uid", slice(func(s *ClusterStatusSlice) { s.OwnerReferences[0].UID = "other" }), false},
		{"controlled by another kind", slice(func(s *ClusterStatusSlice) { s.OwnerReferences[0].Kind = KindApplicationPolicy }), false},
		{"names another declaration", slice(func(s *ClusterStatusSlice) { s.Declaration.Name = "other" }), false},
		{"names another uid", slice(func(s *ClusterStatusSlice) { s.Declaration.UID = "other" }), false},
		{"names another kind", slice(func(s *ClusterStatusSlice) { s.Declaration.Kind = KindApplicationPolicy }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.slice.Of(KindFleetPolicy, "fp", uid); got != tc.want {
				t.Errorf("Of = %v, want %v", got, tc.want)
			}
		})
	}
}
