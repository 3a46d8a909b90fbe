package work

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

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

func TestConfirms(t *testing.T) {
	synced := func(token string, a policyhubv1.ActionCounts) Result {
		return Result{Token: token, DeclarationResult: DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced, Actions: a}}
	}
	created := synced("t1", policyhubv1.ActionCounts{Created: 2, Deleted: 1})
	for _, tc := range []struct {
		name string
		prev Result
		next Result
		want bool
	}{
		{"a resync finds the created objects unchanged", created, synced("t1", policyhubv1.ActionCounts{Unchanged: 2}), true},
		{"it restored one (drift)", created, synced("t1", policyhubv1.ActionCounts{Unchanged: 1, Updated: 1}), false},
		{"an object fewer than before", created, synced("t1", policyhubv1.ActionCounts{Unchanged: 1}), false},
		{"a new wanted state", created, synced("t2", policyhubv1.ActionCounts{Unchanged: 2}), false},
		{"failed before", Result{Token: "t1", DeclarationResult: DeclarationResult{Phase: policyhubv1.ClusterPhaseFailed}}, synced("t1", policyhubv1.ActionCounts{Unchanged: 2}), false},
		{"a dry-run", created, Result{Token: "t1", DeclarationResult: DeclarationResult{Phase: policyhubv1.ClusterPhaseDryRun, Actions: policyhubv1.ActionCounts{Unchanged: 2}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := confirms(tc.prev, tc.next); got != tc.want {
				t.Errorf("confirms = %v, want %v", got, tc.want)
			}
		})
	}
}

// A cluster's config is built once and kept with its worker: callers get the same one back on
// every reconcile, and nothing once the cluster is forgotten (it left the fleet).
func TestWorkersKeepEachClustersConfig(t *testing.T) {
	ws, err := NewWorkers(WorkersOptions{Sync: Options{HubID: "hub", Lock: LockOptions{Identity: "test"}}, RetryMin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	if _, ok := ws.Config("c1"); ok {
		t.Fatal("a config for a cluster without a worker")
	}
	// Nothing listens there: the worker finds the cluster unreachable and waits an hour.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ws.Want(Cluster{Name: "c1", Config: cfg}, Declaration{Source: "FleetPolicy/p"}, "t1")
	if got, ok := ws.Config("c1"); !ok || got != cfg {
		t.Fatalf("Config(c1) = %p, %v; want the worker's %p", got, ok, cfg)
	}
	ws.Forget("c1")
	if _, ok := ws.Config("c1"); ok {
		t.Error("the config outlived the cluster's worker")
	}
}
