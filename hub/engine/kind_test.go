package engine

import (
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The registry holds every declaration kind, in the API's order, each with its reconciler; a kind
// left out, or one that is no declaration kind, is refused.
func TestNewRegistryPairsEveryKind(t *testing.T) {
	setups := func(kinds ...string) map[string]func(ctrl.Manager) error {
		m := map[string]func(ctrl.Manager) error{}
		for _, k := range kinds {
			m[k] = func(ctrl.Manager) error { return nil }
		}
		return m
	}
	var all []string
	for _, k := range policyhubv1.DeclarationKinds() {
		all = append(all, k.Kind)
	}
	r, err := NewRegistry(setups(all...))
	if err != nil || len(r) != len(all) {
		t.Fatalf("registry %v, %v: want every kind", r, err)
	}
	for i, k := range r {
		if k.Kind != all[i] || k.Setup == nil {
			t.Errorf("kind %d: %s, want %s with its setup", i, k.Kind, all[i])
		}
	}
	if _, err := NewRegistry(setups(all[1:]...)); err == nil {
		t.Error("a kind without a reconciler was registered")
	}
	if _, err := NewRegistry(setups(append(all, "Unknown")...)); err == nil {
		t.Error("a reconciler of no declaration kind was registered")
	}
}
