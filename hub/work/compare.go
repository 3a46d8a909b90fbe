package work

import (
	"reflect"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// maxDiff is the longest diff kept per object in status (the API's limit).
const maxDiff = 4096

// inSync reports whether the live object already holds the desired content, as far as can be
// told without asking the cluster: the same content hash, every field the desired object sets
// has the same value live, and no other manager owns a field policyhub does not set
// (foreignPaths). Fields only the live object has (defaults, status) do not count here, and
// managedFields cannot tell the hub's apply from someone else's under its name: an object this
// finds in sync is unchanged only once the cluster confirmed it (verify.go). A field someone
// changed or added in the cluster is drift, corrected by applying again and removing what was
// added.
func inSync(desired, live *unstructured.Unstructured) bool {
	if desired.GetAnnotations()[policyhubv1.AnnotationContentHash] != live.GetAnnotations()[policyhubv1.AnnotationContentHash] {
		return false
	}
	if paths, err := foreignPaths(live); err != nil || len(paths) > 0 {
		return false
	}
	return contains(live.Object, desired.Object)
}

// contains reports whether have holds every field of want with an equal value. Lists must match
// element by element; numbers compare by value whatever their Go type.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, found := h[k]
			if !found || !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		if hf, ok := number(have); ok {
			wf, ok := number(want)
			return ok && hf == wf
		}
		return reflect.DeepEqual(have, want)
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// diff is a unified diff from the live object to the object the apply would leave (the dry-run's
// answer), without the fields the server manages; live nil means the object is new. Cut to 4 KiB.
func diff(live, after *unstructured.Unstructured) string {
	from, to := "", toYAML(after)
	fromName := "live (absent)"
	if live != nil {
		from, fromName = toYAML(live), "live"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(from), B: difflib.SplitLines(to),
		FromFile: fromName, ToFile: "after sync", Context: 3,
	})
	if err != nil {
		return "diff failed: " + err.Error()
	}
	if len(text) > maxDiff {
		const cut = "\n... (diff cut at 4 KiB)\n"
		text = text[:maxDiff-len(cut)]
		text = text[:strings.LastIndexByte(text, '\n')+1] + cut[1:]
	}
	return text
}

// toYAML renders obj without server-managed metadata and status, for diffs a person reads.
func toYAML(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	c := obj.DeepCopy()
	for _, field := range []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", field)
	}
	delete(c.Object, "status")
	out, err := yaml.Marshal(c.Object)
	if err != nil {
		return err.Error()
	}
	return string(out)
}
