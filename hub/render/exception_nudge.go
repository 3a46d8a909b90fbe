package render

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// AnnotationExceptionsInForce, on a namespaced CEL policy the hub ships, sums up the hub's
// exceptions in force from it in the cluster (a hash of their names). Kyverno 1.19 recompiles a
// Namespaced* policy, and so takes an exception of it in or out, only on the policy's own events
// (kyverno#17605: an exception's events name the policy without its namespace): the annotation
// changes when such an exception is written to or removed from the cluster, and the update of the
// policy is that event.
const AnnotationExceptionsInForce = "policyhub.io/exceptions-in-force"

// MissesExceptionEvents says whether Kyverno misses exception changes for obj until obj itself
// changes: the namespaced policies.kyverno.io kinds.
func MissesExceptionEvents(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == policiesGroup && strings.HasPrefix(gvk.Kind, "Namespaced")
}

// PolicyRef names obj as ExceptedPolicy.Ref does: kind/name or kind/namespace/name.
func PolicyRef(obj *unstructured.Unstructured) string {
	return ExceptedPolicy{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}.Ref()
}

// WithExceptionsInForce marks, in each cluster, the policies that miss exception events with the
// exceptions in force from them there (inForce: cluster → policy ref → exception names), so
// that they change when those do. The targets' objects are shared and never changed: a cluster
// whose objects change gets its own list, with a marked copy of each changed object.
func WithExceptionsInForce(t *Targets, inForce map[string]map[string][]string) error {
	for _, cluster := range slices.Sorted(maps.Keys(inForce)) {
		objs, ok := t.Objects[cluster]
		if !ok {
			continue
		}
		var marked []*unstructured.Unstructured
		for i, obj := range objs {
			names := inForce[cluster][PolicyRef(obj)]
			if len(names) == 0 || !MissesExceptionEvents(obj) {
				continue
			}
			if marked == nil {
				marked = slices.Clone(objs)
			}
			c := obj.DeepCopy()
			annotations := c.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[AnnotationExceptionsInForce] = exceptionsHash(names)
			c.SetAnnotations(annotations)
			hash, err := ContentHash(c)
			if err != nil {
				return err
			}
			annotations[policyhubv1.AnnotationContentHash] = hash
			c.SetAnnotations(annotations)
			marked[i] = c
		}
		if marked != nil {
			t.Objects[cluster] = marked
		}
	}
	return nil
}

// exceptionsHash is the first 16 hex digits of the sha256 of the sorted names.
func exceptionsHash(names []string) string {
	sorted := slices.Sorted(slices.Values(names))
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return hex.EncodeToString(sum[:8])
}
