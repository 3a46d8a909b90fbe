package controllers

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Only the apiserver's refusal of a write into a namespace that does not exist (its namespace
// lifecycle admission answers 404 for the namespace) stops the hub; another 404, a refusal by
// RBAC or no error does not.
func TestNamespaceMissing(t *testing.T) {
	for name, tt := range map[string]struct {
		err  error
		want bool
	}{
		"namespace missing":          {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "policyhub-system"), true},
		"wrapped":                    {fmt.Errorf("apply: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "policyhub-system")), true},
		"the ConfigMap is not found": {apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "policyhub-hub-info"), false},
		"forbidden":                  {apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "policyhub-hub-info", fmt.Errorf("no")), false},
		"none":                       {nil, false},
	} {
		if got := namespaceMissing(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", name, got, tt.want)
		}
	}
}
