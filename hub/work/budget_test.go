package work

import (
	"fmt"
	"k8s.io/client-go/rest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func TestAdmit(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		budget  int
		demands []demand
		// refused: source → what the tenant would hold with it.
		refused map[string]int
	}{
		{"within budget", 5, []demand{
			{source: "a", tenant: "t", created: at(0), objects: 2},
			{source: "b", tenant: "t", created: at(1), objects: 3},
		}, map[string]int{}},
		{"the newest past it is refused", 4, []demand{
			{source: "a", tenant: "t", created: at(0), objects: 2},
			{source: "b", tenant: "t", created: at(1), objects: 2},
			{source: "c", tenant: "t", created: at(2), objects: 1},
		}, map[string]int{"c": 5}},
		{"and every newer one, even one that would fit alone", 4, []demand{
			{source: "new-small", tenant: "t", created: at(3), objects: 1},
			{source: "a", tenant: "t", created: at(0), objects: 3},
			{source: "big", tenant: "t", created: at(2), objects: 5},
		}, map[string]int{"big": 8, "new-small": 9}},
		{"the same second: by source", 3, []demand{
			{source: "ApplicationPolicy/t/b", tenant: "t", created: at(0), objects: 2},
			{source: "ApplicationPolicy/t/a", tenant: "t", created: at(0), objects: 2},
		}, map[string]int{"ApplicationPolicy/t/b": 4}},
		{"tenants are counted apart", 3, []demand{
			{source: "a1", tenant: "a", created: at(0), objects: 3},
			{source: "b1", tenant: "b", created: at(1), objects: 3},
			{source: "a2", tenant: "a", created: at(2), objects: 1},
		}, map[string]int{"a2": 4}},
		{"the platform's declarations are not counted", 1, []demand{
			{source: "FleetPolicy/huge", created: at(0), objects: 500},
			{source: "ApplicationPolicy/t/a", tenant: "t", created: at(1), objects: 1},
		}, map[string]int{}},
		{"a removal is never refused, and holds nothing", 2, []demand{
			{source: "a", tenant: "t", created: at(0), objects: 3},
			{source: "removed", tenant: "t", created: at(1)},
			{source: "b", tenant: "t", created: at(2), objects: 1},
		}, map[string]int{"a": 3, "b": 4}},
		{"one declaration alone past the budget", 10, []demand{
			{source: "a", tenant: "t", created: at(0), objects: 11},
		}, map[string]int{"a": 11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]int{}
			for source, r := range admit(tc.budget, tc.demands) {
				got[source] = r.holding
				if r.budget != tc.budget {
					t.Errorf("%s: budget %d, want %d", source, r.budget, tc.budget)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.refused) {
				t.Errorf("refused %v, want %v", got, tc.refused)
			}
		})
	}
}

// The decision depends on the declarations, not on the order they were handed over in (a
// replica that starts, or takes a cluster over, hears of them in any order).
func TestAdmitIgnoresOrder(t *testing.T) {
	demands := []demand{
		{source: "a", tenant: "t", created: t0, objects: 2},
		{source: "b", tenant: "t", created: t0.Add(time.Second), objects: 2},
		{source: "c", tenant: "t", created: t0.Add(time.Second), objects: 1},
		{source: "d", tenant: "u", created: t0, objects: 4},
		{source: "e", tenant: "t", created: t0.Add(2 * time.Second), objects: 1},
	}
	want := fmt.Sprint(admit(4, demands))
	for i := range 50 {
		shuffled := slices.Clone(demands)
		for j := range shuffled {
			k := (j*7 + i*3) % len(shuffled)
			shuffled[j], shuffled[k] = shuffled[k], shuffled[j]
		}
		if got := fmt.Sprint(admit(4, shuffled)); got != want {
			t.Fatalf("order %v: %s, want %s", shuffled, got, want)
		}
	}
}

func TestOverBudget(t *testing.T) {
	msg := refusal{tenant: "team-a", holding: 612, objects: 112, budget: 500}.message("cluster-1")
	if want := "tenant team-a would hold 612 objects in cluster-1, over its budget of 500 (--max-objects-per-tenant-per-cluster)"; !strings.HasPrefix(msg, want) {
		t.Errorf("message %q, want it to start with %q", msg, want)
	}
	if !OverBudget(true, msg) || OverBudget(false, msg) {
		t.Error("a refusal is over budget only as a failure")
	}
	for _, other := range []string{"cluster-1: unreachable: connection refused", "tenant x said (--max-objects-per-tenant-per-cluster)",
		"what it held here could not be removed: timeout; " + msg} {
		if OverBudget(true, other) {
			t.Errorf("%q taken for a refusal", other)
		}
	}
}

// budgetWorkers are Workers with one worker for cluster c1 that runs no goroutine: Want and Drop
// decide as they would, and nothing reaches a cluster.
func budgetWorkers(t *testing.T, budget int) (*Workers, *worker) {
	t.Helper()
	ws, err := NewWorkers(WorkersOptions{Sync: Options{HubID: "hub", Lock: LockOptions{Identity: "test"}}, TenantBudget: budget,
		ClusterConfig: func(string) (*rest.Config, error) { return &rest.Config{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	w := &worker{cluster: Cluster{Name: "c1"}, wants: map[string]wanted{}, results: map[string]Result{}, dirty: map[string]bool{},
		awaiting: map[string]map[plan.Key]bool{}, tenants: map[string]map[string]bool{}, refused: map[string]refusal{},
		wake: make(chan struct{}, 1), stop: func() {}, done: make(chan struct{})}
	close(w.done)
	ws.workers["c1"] = w
	return ws, w
}

func policies(n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	for i := range out {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kyverno.io/v1")
		u.SetKind("Policy")
		u.SetNamespace("t")
		u.SetName(fmt.Sprintf("p%d", i))
		out[i] = u
	}
	return out
}

func refusedSources(ws *Workers, w *worker) []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []string
	for source := range w.refused {
		out = append(out, source)
	}
	sort.Strings(out)
	return out
}

// A worker refuses a tenant's newest declarations past its budget before its pass: they are
// handed to the pass as wanting nothing (their objects removed) with the refusal; the platform's
// declarations are not counted; a removal of the tenant frees budget, and a refused declaration
// is admitted again, in a pass of its own.
func TestWorkerBudget(t *testing.T) {
	ws, w := budgetWorkers(t, 4)
	const c1 = "c1"
	decl := func(name string, objects, second int) Declaration {
		return Declaration{Source: "ApplicationPolicy/t/" + name, Objects: policies(objects), Prune: true, Tenant: "t", Created: t0.Add(time.Duration(second) * time.Second)}
	}
	ws.Want(c1, decl("c", 2, 3), "1")
	ws.Want(c1, Declaration{Source: "FleetPolicy/f", Objects: policies(10), Prune: true, Created: t0}, "1")
	ws.Want(c1, decl("b", 2, 2), "1")
	ws.Want(c1, decl("a", 1, 1), "1")
	if got := refusedSources(ws, w); fmt.Sprint(got) != "[ApplicationPolicy/t/c]" {
		t.Fatalf("refused %v, want the newest, c", got)
	}
	decls, _, refused := ws.takeDirty(w)
	for i, d := range decls {
		switch d.Source {
		case "ApplicationPolicy/t/c":
			if len(d.Objects) != 0 || !d.Prune || !strings.HasPrefix(refused[i], "tenant t would hold 5 objects in c1, over its budget of 4") {
				t.Errorf("c handed over as %+v, refusal %q; want nothing wanted, pruned, refused", d, refused[i])
			}
		default:
			if len(d.Objects) == 0 || refused[i] != "" {
				t.Errorf("%s handed over with %d objects, refusal %q", d.Source, len(d.Objects), refused[i])
			}
		}
	}
	if len(decls) != 4 {
		t.Errorf("%d declarations in the pass, want 4", len(decls))
	}

	// b grows: c stays refused, now saying so with the new count; b is admitted (older).
	ws.Want(c1, decl("b", 3, 2), "2")
	ws.mu.Lock()
	if r := w.refused["ApplicationPolicy/t/c"]; r.holding != 6 {
		t.Errorf("c's refusal: %+v, want it to say 6", r)
	}
	ws.mu.Unlock()
	if got := refusedSources(ws, w); fmt.Sprint(got) != "[ApplicationPolicy/t/c]" {
		t.Fatalf("refused %v, want c still", got)
	}
	if got := ws.takeDirtySources(w); fmt.Sprint(got) != "[ApplicationPolicy/t/b ApplicationPolicy/t/c]" {
		t.Errorf("synced again: %v, want b (changed) and c (its refusal changed)", got)
	}
	// b renders nothing here any more (a removal): c fits again and is synced as it wants.
	ws.Want(c1, decl("b", 0, 2), "3")
	if got := refusedSources(ws, w); len(got) != 0 {
		t.Fatalf("refused %v, want none", got)
	}
	if got := ws.takeDirtySources(w); fmt.Sprint(got) != "[ApplicationPolicy/t/b ApplicationPolicy/t/c]" {
		t.Errorf("synced again: %v, want b and c", got)
	}
	// A new declaration past the budget; a dropped older one frees its place.
	ws.Want(c1, decl("d", 2, 4), "1")
	if got := refusedSources(ws, w); fmt.Sprint(got) != "[ApplicationPolicy/t/d]" {
		t.Fatalf("refused %v, want d", got)
	}
	ws.Drop("c1", "ApplicationPolicy/t/a")
	if got := refusedSources(ws, w); len(got) != 0 {
		t.Fatalf("refused %v after a was dropped, want none", got)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(w.tenants["t"]) != 3 {
		t.Errorf("tenant t has %v, want b, c and d", w.tenants["t"])
	}
}

func (ws *Workers) takeDirtySources(w *worker) []string {
	decls, _, _ := ws.takeDirty(w)
	var out []string
	for _, d := range decls {
		out = append(out, d.Source)
	}
	return out
}

// A refusal's pass removes what the declaration held and reports the refusal, not retried; a
// removal that failed is that failure, retried.
func TestRefuse(t *testing.T) {
	msg := refusal{tenant: "t", holding: 4, objects: 1, budget: 3}.message("c1")
	res := &ClusterResult{Declarations: []*DeclarationResult{
		{Source: "admitted", Phase: policyhubv1.ClusterPhaseSynced, Message: "created 1"},
		{Source: "removed", Phase: policyhubv1.ClusterPhaseSynced, Actions: policyhubv1.ActionCounts{Deleted: 2}, InForce: new(bool)},
		{Source: "unremoved", Phase: policyhubv1.ClusterPhaseFailed, Message: "c1: unreachable: connection refused"},
	}}
	refuse(res, []string{"", msg, msg})
	if r := res.Declarations[0]; r.Phase != policyhubv1.ClusterPhaseSynced || retried(*r) {
		t.Errorf("admitted: %+v", r)
	}
	if r := res.Declarations[1]; r.Phase != policyhubv1.ClusterPhaseFailed || r.Message != msg || r.Actions.Deleted != 2 || r.InForce != nil || retried(*r) {
		t.Errorf("refused: %+v, want Failed with the refusal, its deletions counted, not retried", r)
	}
	if r := res.Declarations[2]; r.Phase != policyhubv1.ClusterPhaseFailed || !strings.Contains(r.Message, "connection refused") || !retried(*r) {
		t.Errorf("refused, not removed: %+v, want the failure, retried", r)
	}
}
