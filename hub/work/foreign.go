package work

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The hub owns the whole of every object it ships: a field another manager added (an exclude, an
// enforcement override, a matchCondition that never matches) weakens the policy as surely as a
// changed value, and server-side apply keeps other managers' fields. So a field of an owned
// object that some other manager owns, and policyhub's apply does not, is drift: the object is
// not in sync, and the write after the apply removes the field (or resets the structure holding
// it to policyhub's value). Status is the engine's (Kyverno's), written through the status
// subresource, and is not looked at.

// foreignPaths are the JSON paths of obj's fields that managers other than policyhub own and
// policyhub's apply does not, cut to the outermost field each lies in that holds no list element
// (a list element's path is not a JSON pointer; its list is reset as a whole). Sorted, outermost
// first, none inside another. Nil when obj has no managedFields (the watch cache keeps them only
// for objects with foreign fields).
func foreignPaths(obj *unstructured.Unstructured) ([][]string, error) {
	entries := obj.GetManagedFields()
	// Every watch event of an owned object passes here: most name only policyhub's apply and
	// the status writer, and need no parsing.
	if !slices.ContainsFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Subresource == "" && (e.Manager != FieldManager || e.Operation != metav1.ManagedFieldsOperationApply)
	}) {
		return nil, nil
	}
	ours, theirs := &fieldpath.Set{}, &fieldpath.Set{}
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("managedFields of %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply {
			ours = ours.Union(set)
		} else {
			theirs = theirs.Union(set)
		}
	}
	foreign := theirs.Difference(ours)
	seen := map[string]bool{}
	var out [][]string
	foreign.Leaves().Iterate(func(p fieldpath.Path) {
		var fields []string
		for _, el := range p {
			if el.FieldName == nil {
				break
			}
			fields = append(fields, *el.FieldName)
		}
		if len(fields) == 0 || isServerMetadata(fields) {
			return
		}
		if key := strings.Join(fields, "\x00"); !seen[key] {
			seen[key] = true
			out = append(out, fields)
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) < len(out[j])
		}
		return strings.Join(out[i], "/") < strings.Join(out[j], "/")
	})
	var outermost [][]string
	for _, p := range out {
		inside := false
		for _, q := range outermost {
			if len(q) < len(p) && equalPrefix(q, p) {
				inside = true
				break
			}
		}
		if !inside {
			outermost = append(outermost, p)
		}
	}
	return outermost, nil
}

// isServerMetadata says whether path is metadata the API server keeps, not content.
func isServerMetadata(path []string) bool {
	return len(path) == 2 && path[0] == "metadata" && (path[1] == "resourceVersion" || path[1] == "generation" || path[1] == "uid" || path[1] == "creationTimestamp" || path[1] == "managedFields")
}

func equalPrefix(prefix, path []string) bool {
	for i := range prefix {
		if prefix[i] != path[i] {
			return false
		}
	}
	return true
}

// restoreStep is one foreign path's fate: reset to desired's value, or removed.
type restoreStep struct {
	path   []string
	value  any
	remove bool
}

// restoreSteps are what taking the foreign paths out of live does: a path desired sets is reset
// to desired's value, any other present in live is removed.
func restoreSteps(desired, live *unstructured.Unstructured, paths [][]string) []restoreStep {
	var steps []restoreStep
	for _, p := range paths {
		if _, inLive, _ := unstructured.NestedFieldNoCopy(live.Object, p...); !inLive {
			continue
		}
		if value, inDesired, _ := unstructured.NestedFieldCopy(desired.Object, p...); inDesired {
			steps = append(steps, restoreStep{path: p, value: value})
			continue
		}
		steps = append(steps, restoreStep{path: p, remove: true})
	}
	return steps
}

// restorePatch is the JSON patch of restoreSteps; its first operation tests live's
// resourceVersion, so the patch applies only to the object it was made from. Nil when nothing is
// foreign.
func restorePatch(desired, live *unstructured.Unstructured, paths [][]string) ([]byte, error) {
	steps := restoreSteps(desired, live, paths)
	if len(steps) == 0 {
		return nil, nil
	}
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()}}
	for _, st := range steps {
		if st.remove {
			ops = append(ops, map[string]any{"op": "remove", "path": jsonPointer(st.path)})
			continue
		}
		ops = append(ops, map[string]any{"op": "replace", "path": jsonPointer(st.path), "value": st.value})
	}
	return json.Marshal(ops)
}

// pointerEscapes escapes a field name for a JSON pointer (RFC 6901).
var pointerEscapes = strings.NewReplacer("~", "~0", "/", "~1")

// jsonPointer spells a field path as a JSON pointer.
func jsonPointer(path []string) string {
	var b strings.Builder
	for _, f := range path {
		b.WriteByte('/')
		b.WriteString(pointerEscapes.Replace(f))
	}
	return b.String()
}

// withoutForeign is obj after restoreSteps: what a dry-run shows the restore write would leave.
func withoutForeign(desired, obj *unstructured.Unstructured, paths [][]string) *unstructured.Unstructured {
	out := obj.DeepCopy()
	for _, st := range restoreSteps(desired, obj, paths) {
		if st.remove {
			unstructured.RemoveNestedField(out.Object, st.path...)
			continue
		}
		_ = unstructured.SetNestedField(out.Object, st.value, st.path...)
	}
	return out
}
