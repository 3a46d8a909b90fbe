package engine

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

const (
	other     = policyhubv1.LegacyOwnerOther
	policyhub = policyhubv1.LegacyOwnerPolicyhub
)

func legacyObject(namespace, name string, owned bool) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if owned {
		m.Labels = map[string]string{policyhubv1.LabelManagedBy: "hub-a", "app": "x"}
	}
	return m
}

func TestLegacyStoreCountsAndNames(t *testing.T) {
	changes := 0
	s := NewLegacyStore("Policy", 0, func() { changes++ })
	if s.Synced() {
		t.Fatal("synced before the first list")
	}
	_ = s.Replace([]any{legacyObject("b", "p1", true), legacyObject("a", "p2", false)}, "1")
	_ = s.Add(legacyObject("a", "p0", false))
	_ = s.Update(legacyObject("b", "p1", false)) // the label removed: not ours any more
	before := changes
	_ = s.Update(legacyObject("b", "p1", false)) // a status write: nothing the inventory says
	if changes != before {
		t.Error("an update changing neither presence nor owner signalled a change")
	}
	_ = s.Add(legacyObject("c", "p3", true))
	_ = s.Delete(legacyObject("a", "p2", false))
	_ = s.Delete(legacyObject("z", "never-seen", false))
	got := Inventory([]LegacyKind{s.Snapshot()})
	want := &policyhubv1.LegacyInventory{
		Counts: []policyhubv1.LegacyCount{{Kind: "Policy", Owner: other, Count: 2}, {Kind: "Policy", Owner: policyhub, Count: 1}},
		Objects: []policyhubv1.LegacyObject{{Kind: "Policy", Namespace: "a", Name: "p0", Owner: other},
			{Kind: "Policy", Namespace: "b", Name: "p1", Owner: other}, {Kind: "Policy", Namespace: "c", Name: "p3", Owner: policyhub}},
	}
	if !s.Synced() || !reflect.DeepEqual(got, want) {
		t.Errorf("inventory %+v, want %+v", got, want)
	}
	for _, o := range []*metav1.PartialObjectMetadata{legacyObject("a", "p0", false), legacyObject("b", "p1", false), legacyObject("c", "p3", true)} {
		_ = s.Delete(o)
	}
	if got := Inventory([]LegacyKind{s.Snapshot()}); len(got.Counts) != 0 || len(got.Objects) != 0 {
		t.Errorf("after every object was deleted: %+v", got)
	}
}

// A kind with more objects than the bound: the counts stay exact through adds, deletes and
// updates, only the bound's worth of names is kept, those not policyhub's first.
func TestLegacyStoreBeyondTheBound(t *testing.T) {
	s := NewLegacyStore("ClusterPolicy", 10, nil)
	var list []any
	for i := range 30 {
		list = append(list, legacyObject("", fmt.Sprintf("owned-%02d", i), true))
	}
	for i := range 5 {
		list = append(list, legacyObject("", fmt.Sprintf("theirs-%02d", i), false))
	}
	_ = s.Replace(list, "1")
	if s.Tracked() != 10 {
		t.Fatalf("%d names kept, bound 10", s.Tracked())
	}
	k := s.Snapshot()
	if k.Counts[other] != 5 || k.Counts[policyhub] != 30 {
		t.Fatalf("counts %v, want 5 other and 30 policyhub", k.Counts)
	}
	for i := range 5 {
		if k.Objects[i].Owner != other {
			t.Fatalf("names %v: those not policyhub's are not first", k.Objects)
		}
	}
	for i := range 20 {
		_ = s.Add(legacyObject("", fmt.Sprintf("new-%02d", i), false))
	}
	for i := range 30 {
		_ = s.Update(legacyObject("", fmt.Sprintf("owned-%02d", i), true))
	}
	for i := range 30 {
		_ = s.Delete(legacyObject("", fmt.Sprintf("owned-%02d", i), true))
	}
	k = s.Snapshot()
	if k.Counts[other] != 25 || k.Counts[policyhub] != 0 || s.Tracked() > 10 {
		t.Fatalf("after 20 adds and 30 deletes: counts %v, %d names kept; want 25 other, 0 policyhub, at most 10 names", k.Counts, s.Tracked())
	}
	for i := range 20 {
		_ = s.Delete(legacyObject("", fmt.Sprintf("new-%02d", i), false))
	}
	for i := range 5 {
		_ = s.Delete(legacyObject("", fmt.Sprintf("theirs-%02d", i), false))
	}
	if k = s.Snapshot(); k.Counts[other] != 0 || k.Counts[policyhub] != 0 || s.Tracked() != 0 {
		t.Fatalf("after every object was deleted: counts %v, %d names", k.Counts, s.Tracked())
	}
}

func TestInventoryOrderAndBound(t *testing.T) {
	var kinds []LegacyKind
	for _, kind := range policyhubv1.LegacyKinds {
		s := NewLegacyStore(kind, 0, nil)
		var list []any
		for i := range 40 {
			list = append(list, legacyObject(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("%s-%02d", kind, i), i%2 == 0))
		}
		_ = s.Replace(list, "1")
		kinds = append(kinds, s.Snapshot())
	}
	inv := Inventory(kinds)
	if len(inv.Counts) != 2*len(policyhubv1.LegacyKinds) || len(inv.Objects) != policyhubv1.MaxLegacyNames {
		t.Fatalf("%d counts and %d names, want %d and %d", len(inv.Counts), len(inv.Objects), 2*len(policyhubv1.LegacyKinds), policyhubv1.MaxLegacyNames)
	}
	var total int64
	for _, c := range inv.Counts {
		total += c.Count
	}
	if total != 40*int64(len(policyhubv1.LegacyKinds)) {
		t.Errorf("the counts cover %d objects, want %d", total, 40*len(policyhubv1.LegacyKinds))
	}
	for i := 1; i < len(inv.Objects); i++ {
		if compareObjects(inv.Objects[i-1], inv.Objects[i]) >= 0 {
			t.Fatalf("names out of order at %d: %+v then %+v", i, inv.Objects[i-1], inv.Objects[i])
		}
	}
	if inv.Objects[len(inv.Objects)-1].Owner != other {
		t.Error("a policyhub object named while 100 others were not")
	}
	spec := policyhubv1.PolicyReportSummarySpec{Cluster: "c", Engine: policyhubv1.EngineInfo{Legacy: inv}}
	if err := spec.Validate(); err != nil {
		t.Errorf("the hub refuses the inventory: %v", err)
	}
}

// The memory a kind of 100,000 objects costs the agent once listed: names are kept for
// MaxTrackedPerKind objects only, the rest is counted (about 1 MiB, whatever the number of objects).
func BenchmarkLegacyStore100k(b *testing.B) {
	objects := func() []any {
		list := make([]any, 100000)
		for i := range list {
			list[i] = legacyObject(fmt.Sprintf("namespace-%04d", i%1000), fmt.Sprintf("require-labels-policy-%06d", i), i%2 == 0)
		}
		return list
	}
	var retained uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewLegacyStore("Policy", 0, nil)
		_ = s.Replace(objects(), "1")
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.Tracked() != MaxTrackedPerKind {
			b.Fatalf("%d names kept", s.Tracked())
		}
		retained = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(s)
	}
	b.ReportMetric(float64(retained), "retained-bytes")
}
