package controllers

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// After a handover the summaries of the clusters a dead replica left go first in the queue; the
// rest keep their order.
func TestInheritedClustersSummariesGoFirst(t *testing.T) {
	key := func(ns string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: "summary"} }
	for _, tc := range []struct {
		name      string
		keys      []string
		inherited []string
		want      []string
	}{
		{"nothing inherited: as listed", []string{"a", "b", "c"}, nil, []string{"a", "b", "c"}},
		{"inherited first, each part in order", []string{"a", "b", "c", "d", "e"}, []string{"d", "b"}, []string{"b", "d", "a", "c", "e"}},
		{"an inherited cluster without a summary changes nothing", []string{"a", "b"}, []string{"z"}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []types.NamespacedName
			for _, k := range tc.keys {
				keys = append(keys, key(k))
			}
			var got []string
			for _, k := range inheritedFirst(keys, tc.inherited) {
				got = append(got, k.Namespace)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
