package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
)

// An agent fills its summary's metadata (256 KiB of annotations, labels, owner references,
// finalizers): neither the manager's cache of its replica's summaries nor the summaries' metadata
// cache, which holds the whole fleet's in every replica, keeps any of it, only what the hub reads.
func TestSummaryCachesKeepOnlyWhatTheHubReads(t *testing.T) {
	hostile := func() metav1.ObjectMeta {
		m := metav1.ObjectMeta{
			Namespace: "cluster-1", Name: policyhubv1.SummaryName, UID: types.UID("u1"), ResourceVersion: "42", Generation: 7,
			Labels:        map[string]string{policyhubv1.LabelWorkedBy: "replica-a"},
			Annotations:   map[string]string{},
			Finalizers:    []string{},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "agent", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
		}
		for i := range 4 {
			m.Annotations["example.com/a"+strings.Repeat("x", i)] = strings.Repeat("y", 63*1024)
		}
		for i := range 500 {
			key := "example.com/l" + strings.Repeat("z", i%60) + string(rune('a'+i/60))
			m.Labels[key] = strings.Repeat("v", 63)
			m.Finalizers = append(m.Finalizers, key)
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: key, UID: types.UID(key)})
		}
		return m
	}
	wantMeta := metav1.ObjectMeta{Namespace: "cluster-1", Name: policyhubv1.SummaryName, UID: "u1", ResourceVersion: "42", Generation: 7,
		Labels: map[string]string{policyhubv1.LabelWorkedBy: "replica-a"}}
	transformOf := func(what string, o cache.Options, want func(any) bool) toolscache.TransformFunc {
		t.Helper()
		for obj, by := range o.ByObject {
			if want(obj) {
				if by.Transform == nil {
					t.Fatalf("%s: no transform", what)
				}
				return by.Transform
			}
		}
		t.Fatalf("%s: no summaries selected", what)
		return nil
	}
	isSummary := func(o any) bool { _, ok := o.(*policyhubv1.PolicyReportSummary); return ok }
	isMeta := func(o any) bool {
		m, ok := o.(*metav1.PartialObjectMetadata)
		return ok && m.Kind == kindSummary
	}
	for _, replica := range []string{"", "replica-a"} {
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: hostile(), Spec: policyhubv1.PolicyReportSummarySpec{Cluster: "cluster-1"}}
		s.Status.ObservedGeneration = 7
		kept, err := transformOf("manager's cache", CacheOptions("vela-system", "policyhub-system", replica), isSummary)(s)
		if err != nil {
			t.Fatal(err)
		}
		ks := kept.(*policyhubv1.PolicyReportSummary)
		if !equalMeta(ks.ObjectMeta, wantMeta) || ks.Spec.Cluster != "cluster-1" || ks.Status.ObservedGeneration != 7 {
			t.Errorf("manager's cache (replica %q) keeps %+v spec %+v status %+v", replica, ks.ObjectMeta, ks.Spec, ks.Status)
		}
		if size := jsonSize(t, ks); size > 1024 {
			t.Errorf("manager's cache (replica %q): a summary kept at %d bytes, want under 1 KiB", replica, size)
		}
	}
	m := engine.SummaryMeta()
	m.ObjectMeta = hostile()
	kept, err := transformOf("summaries' metadata cache", summaryMetasOptions(), isMeta)(m)
	if err != nil {
		t.Fatal(err)
	}
	km := kept.(*metav1.PartialObjectMetadata)
	if !equalMeta(km.ObjectMeta, wantMeta) || km.Kind != kindSummary {
		t.Errorf("summaries' metadata cache keeps %+v", km)
	}
	if size := jsonSize(t, km); size > 512 {
		t.Errorf("summaries' metadata cache: %d bytes a summary, want under 512", size)
	}
	// Without the label, none is made up.
	m = engine.SummaryMeta()
	m.Name, m.Annotations = policyhubv1.SummaryName, map[string]string{"a": "b"}
	if kept, _ := keepSummaryMeta(m); kept.(*metav1.PartialObjectMetadata).Labels != nil || kept.(*metav1.PartialObjectMetadata).Annotations != nil {
		t.Errorf("an unlabelled summary kept as %+v", kept)
	}
}

func equalMeta(a, b metav1.ObjectMeta) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
