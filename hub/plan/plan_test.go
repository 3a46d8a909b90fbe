package plan

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

const (
	hub    = "hub-a"
	source = "FleetPolicy/disallow-latest"
)

// obj builds a Kyverno object; managedBy and src set the ownership marks when not empty.
func obj(apiVersion, kind, namespace, name, managedBy, src string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	if managedBy != "" {
		u.SetLabels(map[string]string{policyhubv1.LabelManagedBy: managedBy})
	}
	if src != "" {
		u.SetAnnotations(map[string]string{policyhubv1.AnnotationSource: src})
	}
	return u
}

// shadowObj labels o a preview's shadow.
func shadowObj(o *unstructured.Unstructured) *unstructured.Unstructured {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[policyhubv1.LabelShadow] = policyhubv1.ShadowValue
	o.SetLabels(labels)
	return o
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, KeyOf(o).String())
	}
	return out
}

func TestMake(t *testing.T) {
	desired := obj("kyverno.io/v1", "ClusterPolicy", "", "disallow-latest", hub, source)
	tests := []struct {
		name          string
		desired, live []*unstructured.Unstructured
		prune         bool
		wantApply     []string
		wantDelete    []string
		wantConflicts []string // substrings of each conflict's reason, in order
	}{
		{
			name:      "absent object is applied",
			desired:   []*unstructured.Unstructured{desired},
			wantApply: []string{"ClusterPolicy.kyverno.io/disallow-latest"},
		},
		{
			name:      "owned object is applied (SSA decides whether it changed)",
			desired:   []*unstructured.Unstructured{desired},
			live:      []*unstructured.Unstructured{obj("kyverno.io/v1", "ClusterPolicy", "", "disallow-latest", hub, source)},
			wantApply: []string{"ClusterPolicy.kyverno.io/disallow-latest"},
		},
		{
			name:          "same name, not managed by policyhub: conflict",
			desired:       []*unstructured.Unstructured{desired},
			live:          []*unstructured.Unstructured{obj("kyverno.io/v1", "ClusterPolicy", "", "disallow-latest", "", "")},
			wantConflicts: []string{"ClusterPolicy.kyverno.io/disallow-latest exists and is not managed by policyhub"},
		},
		{
			name:          "same name, another hub's: conflict",
			desired:       []*unstructured.Unstructured{desired},
			live:          []*unstructured.Unstructured{obj("kyverno.io/v1", "ClusterPolicy", "", "disallow-latest", "hub-b", source)},
			wantConflicts: []string{`managed by another policyhub hub ("hub-b")`},
		},
		{
			name:          "same name, another declaration of this hub: conflict",
			desired:       []*unstructured.Unstructured{desired},
			live:          []*unstructured.Unstructured{obj("kyverno.io/v1", "ClusterPolicy", "", "disallow-latest", hub, "FleetPolicy/other")},
			wantConflicts: []string{"belongs to FleetPolicy/other of this hub"},
		},
		{
			name:    "same name in another group or kind is not the same object",
			desired: []*unstructured.Unstructured{desired},
			live: []*unstructured.Unstructured{
				obj("policies.kyverno.io/v1", "ValidatingPolicy", "", "disallow-latest", "", ""),
				obj("kyverno.io/v1", "Policy", "default", "disallow-latest", "", ""),
			},
			wantApply: []string{"ClusterPolicy.kyverno.io/disallow-latest"},
		},
		{
			name:  "owned and no longer desired: pruned",
			prune: true,
			live: []*unstructured.Unstructured{
				obj("kyverno.io/v1", "ClusterPolicy", "", "old", hub, source),
				obj("kyverno.io/v1", "ClusterPolicy", "", "not-ours", "", ""),
				obj("kyverno.io/v1", "ClusterPolicy", "", "other-hub", "hub-b", source),
				obj("kyverno.io/v1", "ClusterPolicy", "", "other-source", hub, "FleetPolicy/other"),
			},
			wantDelete: []string{"ClusterPolicy.kyverno.io/old"},
		},
		{
			name: "prune off keeps owned objects",
			live: []*unstructured.Unstructured{obj("kyverno.io/v1", "ClusterPolicy", "", "old", hub, source)},
		},
		{
			name: "prune off still removes a preview's shadow no longer wanted, and only its own",
			live: []*unstructured.Unstructured{
				shadowObj(obj("kyverno.io/v1", "ClusterPolicy", "", "policyhub-shadow-old", hub, source)),
				shadowObj(obj("kyverno.io/v1", "ClusterPolicy", "", "policyhub-shadow-other", hub, "FleetPolicy/other")),
				shadowObj(obj("kyverno.io/v1", "ClusterPolicy", "", "policyhub-shadow-not-ours", "", "")),
				obj("kyverno.io/v1", "ClusterPolicy", "", "old", hub, source),
			},
			wantDelete: []string{"ClusterPolicy.kyverno.io/policyhub-shadow-old"},
		},
		{
			name:      "desired and pruned together, sorted by key",
			prune:     true,
			desired:   []*unstructured.Unstructured{obj("kyverno.io/v1", "Policy", "b", "p", hub, source), obj("kyverno.io/v1", "Policy", "a", "p", hub, source)},
			live:      []*unstructured.Unstructured{obj("kyverno.io/v1", "Policy", "c", "p", hub, source), obj("kyverno.io/v1", "Policy", "a", "p", hub, source)},
			wantApply: []string{"Policy.kyverno.io/a/p", "Policy.kyverno.io/b/p"}, wantDelete: []string{"Policy.kyverno.io/c/p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Make(hub, source, tt.desired, tt.live, tt.prune)
			if got := keys(p.Apply); !reflect.DeepEqual(got, tt.wantApply) {
				t.Errorf("apply %v, want %v", got, tt.wantApply)
			}
			if got := keys(p.Delete); !reflect.DeepEqual(got, tt.wantDelete) {
				t.Errorf("delete %v, want %v", got, tt.wantDelete)
			}
			if len(p.Conflicts) != len(tt.wantConflicts) {
				t.Fatalf("conflicts %v, want %d", p.Conflicts, len(tt.wantConflicts))
			}
			for i, c := range p.Conflicts {
				if !strings.Contains(c.Reason, tt.wantConflicts[i]) {
					t.Errorf("conflict %d reason %q lacks %q", i, c.Reason, tt.wantConflicts[i])
				}
			}
		})
	}
}

// Planning every declaration of a pass against a cluster's live objects (200 declarations, 1,000
// live policies of which 800 are foreign): with the index built once per pass, each plan costs in
// proportion to its own objects; Make, which indexes per call, shows what that saves.
func BenchmarkPlanPass(b *testing.B) {
	var live []*unstructured.Unstructured
	for i := range 800 {
		live = append(live, obj("kyverno.io/v1", "ClusterPolicy", "", fmt.Sprintf("foreign-%d", i), "", ""))
	}
	desired := make([][]*unstructured.Unstructured, 200)
	sources := make([]string, 200)
	for i := range desired {
		sources[i] = fmt.Sprintf("FleetPolicy/p-%d", i)
		desired[i] = []*unstructured.Unstructured{obj("kyverno.io/v1", "ClusterPolicy", "", fmt.Sprintf("p-%d", i), hub, sources[i])}
		live = append(live, desired[i][0].DeepCopy())
	}
	check := func(b *testing.B, i int, p Plan) {
		if len(p.Apply) != 1 || len(p.Delete) != 0 || len(p.Conflicts) != 0 {
			b.Fatalf("plan %d: %+v", i, p)
		}
	}
	b.Run("indexed once", func(b *testing.B) {
		for range b.N {
			index := NewLive(hub, live)
			for i, d := range desired {
				check(b, i, index.Make(sources[i], d, true))
			}
		}
	})
	b.Run("indexed per declaration", func(b *testing.B) {
		for range b.N {
			for i, d := range desired {
				check(b, i, Make(hub, sources[i], d, live, true))
			}
		}
	})
}
