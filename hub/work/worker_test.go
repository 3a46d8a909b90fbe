package work

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestSameContent(t *testing.T) {
	policy := func(name, hash string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kyverno.io/v1")
		u.SetKind("ClusterPolicy")
		u.SetName(name)
		if hash != "" {
			u.SetAnnotations(map[string]string{policyhubv1.AnnotationContentHash: hash})
		}
		return u
	}
	base := Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "h1")}, Prune: true}
	for _, tc := range []struct {
		name string
		b    Declaration
		want bool
	}{
		{"same objects and hashes", Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "h1")}, Prune: true}, true},
		{"new content hash", Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "h2")}, Prune: true}, false},
		{"other name", Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("b", "h1")}, Prune: true}, false},
		{"one more object", Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "h1"), policy("b", "h1")}, Prune: true}, false},
		{"dry-run now", Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "h1")}, Prune: true, DryRun: true}, false},
		{"prune off", Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "h1")}}, false},
		{"no objects", Declaration{Source: "s", Prune: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameContent(base, tc.b); got != tc.want {
				t.Errorf("sameContent = %v, want %v", got, tc.want)
			}
		})
	}
	unhashed := Declaration{Source: "s", Objects: []*unstructured.Unstructured{policy("a", "")}}
	if sameContent(unhashed, unhashed) {
		t.Error("objects without a content hash cannot be told apart: they must count as changed")
	}
}
