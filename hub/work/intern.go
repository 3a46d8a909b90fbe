package work

import (
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// specInterner lets the watch caches of all clusters share one copy of equal specs. Every
// cluster that holds a declaration's policy as synced holds the same spec (the same content,
// defaulted by the same Kyverno), so a thousand clusters kept a thousand equal copies of each:
// two thirds of the hub's heap at 1000 clusters x 50 FleetPolicies (bench-scale heap profile).
// Cached objects are only read (plans list them without copying, and copy before changing), so
// sharing is safe; a spec that drifted stays the cluster's own.
type specInterner struct {
	mu sync.Mutex
	// specs are the distinct specs seen, by content hash.
	specs map[string][]map[string]any
}

// Bounds of the interner: a content hash is one rendering of one declaration (a few per
// declaration: modes, namespaces), and a few distinct specs per hash cover clusters whose
// Kyverno versions default differently. Past the bound the table starts over: interning only
// saves memory, it is never needed to be right.
const (
	maxInternedHashes = 4096
	maxSpecsPerHash   = 4
)

func newSpecInterner() *specInterner {
	return &specInterner{specs: map[string][]map[string]any{}}
}

// intern replaces obj's spec by an equal one already held, or holds obj's.
func (in *specInterner) intern(obj *unstructured.Unstructured) {
	hash := obj.GetAnnotations()[policyhubv1.AnnotationContentHash]
	spec, ok := obj.Object["spec"].(map[string]any)
	if hash == "" || !ok {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, held := range in.specs[hash] {
		if reflect.DeepEqual(held, spec) {
			obj.Object["spec"] = held
			return
		}
	}
	if len(in.specs) >= maxInternedHashes {
		clear(in.specs)
	}
	if len(in.specs[hash]) < maxSpecsPerHash {
		in.specs[hash] = append(in.specs[hash], spec)
	}
}
