package controllers

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A scoped hub's cache selects every declaration kind by the label, and keeps the rest of the
// hub's cache settings.
func TestScopeCacheSelectsEveryDeclarationKind(t *testing.T) {
	selector := labels.SelectorFromSet(labels.Set{"shard": "a"})
	base := CacheOptions("vela-system", "policyhub-system", "")
	kept := len(base.ByObject)
	o := ScopeCache(base, selector)
	kinds := policyhubv1.DeclarationKinds()
	if len(o.ByObject) != kept+len(kinds) {
		t.Fatalf("%d objects configured, want the %d kept and one per declaration kind (%d)", len(o.ByObject), kept, len(kinds))
	}
	scoped := map[string]bool{}
	for obj, by := range o.ByObject {
		if by.Label != nil && by.Label.String() == "shard=a" {
			scoped[typeName(obj)] = true
		}
	}
	for _, k := range kinds {
		if !scoped[typeName(k.New())] {
			t.Errorf("%s is not scoped", k.Kind)
		}
	}
}

func typeName(v any) string {
	return fmt.Sprintf("%T", v)
}
