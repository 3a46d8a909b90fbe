package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An object is a hub's only with the managed-by label set to that hub's id: another hub's, an
// empty value, no label, or an empty hub id (a misconfigured caller) never own it.
func TestOwnedBy(t *testing.T) {
	with := func(labels map[string]string) *metav1.ObjectMeta { return &metav1.ObjectMeta{Labels: labels} }
	for name, tt := range map[string]struct {
		obj   *metav1.ObjectMeta
		hubID string
		want  bool
	}{
		"ours":          {with(map[string]string{LabelManagedBy: "hub-a"}), "hub-a", true},
		"another hub's": {with(map[string]string{LabelManagedBy: "hub-b"}), "hub-a", false},
		"no label":      {with(nil), "hub-a", false},
		"empty value":   {with(map[string]string{LabelManagedBy: ""}), "hub-a", false},
		"empty hub id":  {with(map[string]string{LabelManagedBy: ""}), "", false},
	} {
		if got := OwnedBy(tt.obj, tt.hubID); got != tt.want {
			t.Errorf("%s: %v, want %v", name, got, tt.want)
		}
	}
}
