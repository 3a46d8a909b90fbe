package work

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestSpecInterner(t *testing.T) {
	live := func(hash string, action string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
			"spec": map[string]any{"background": true, "validationFailureAction": action},
		}}
		if hash != "" {
			u.SetAnnotations(map[string]string{policyhubv1.AnnotationContentHash: hash})
		}
		return u
	}
	shared := func(a, b *unstructured.Unstructured) bool {
		return reflect.ValueOf(a.Object["spec"]).Pointer() == reflect.ValueOf(b.Object["spec"]).Pointer()
	}
	in := newSpecInterner()
	first, second := live("h1", "Audit"), live("h1", "Audit")
	in.intern(first)
	in.intern(second)
	if !shared(first, second) {
		t.Error("two clusters' equal specs of one content are kept twice")
	}
	drifted := live("h1", "Enforce")
	in.intern(drifted)
	if shared(first, drifted) || drifted.Object["spec"].(map[string]any)["validationFailureAction"] != "Enforce" {
		t.Error("a drifted spec must stay the cluster's own, as it is")
	}
	otherHash := live("h2", "Audit")
	in.intern(otherHash)
	if shared(first, otherHash) {
		t.Error("specs of different contents are shared")
	}
	unhashed, unhashed2 := live("", "Audit"), live("", "Audit")
	in.intern(unhashed)
	in.intern(unhashed2)
	if shared(unhashed, unhashed2) {
		t.Error("objects without a content hash (not rendered by a hub) are interned")
	}
	for i := range maxInternedHashes + 10 {
		in.intern(live(fmt.Sprintf("many-%d", i), "Audit"))
	}
	if n := len(in.specs); n > maxInternedHashes {
		t.Errorf("the interner holds %d hashes, bound %d", n, maxInternedHashes)
	}
}
