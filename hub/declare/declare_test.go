package declare

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Deletion decides before suspension; prune decides what deletion means.
func TestLifecycleOf(t *testing.T) {
	for _, tc := range []struct {
		deleting, suspended, prune bool
		want                       Lifecycle
	}{
		{false, false, true, Sync},
		{false, false, false, Sync},
		{false, true, true, Keep},
		{true, false, true, PruneAll},
		{true, true, true, PruneAll}, // deleting a suspended declaration still prunes it
		{true, false, false, Keep},
	} {
		got, why := LifecycleOf(tc.deleting, tc.suspended, tc.prune)
		if got != tc.want || (got != Sync) != (why != "") {
			t.Errorf("deleting %v, suspended %v, prune %v: %v %q, want %v (with a reason unless Sync)", tc.deleting, tc.suspended, tc.prune, got, why, tc.want)
		}
	}
	if !Prune(nil) || Prune(new(bool)) {
		t.Error("prune is on unless set off")
	}
}

// A declaration leaves the clusters its status lists and its targets no longer place it on.
func TestLeaving(t *testing.T) {
	status := []policyhubv1.ClusterStatus{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	placed := map[string][]*unstructured.Unstructured{"b": nil, "d": nil}
	if got := Leaving(status, placed); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("leaving %v, want a and c", got)
	}
	if got := Leaving(status, nil); len(got) != 3 {
		t.Errorf("placed nowhere: leaving %v, want every cluster it was on", got)
	}
}
