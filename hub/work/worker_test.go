package work

import (
	"errors"
	"slices"
	"strings"
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

// A cluster's config is asked for once, when its worker starts, and kept with it: later wants
// reuse it, and a cluster forgotten (it left the fleet) asks again when wanted again. A cluster
// without a config gets no worker, and its want says why.
func TestWorkersAskEachClustersConfigOnce(t *testing.T) {
	asked := map[string]int{}
	ws, err := NewWorkers(WorkersOptions{Sync: Options{HubID: "hub", Lock: LockOptions{Identity: "test"}}, RetryMin: time.Hour,
		ClusterConfig: func(cluster string) (*rest.Config, error) {
			asked[cluster]++
			if cluster == "bad" {
				return nil, errors.New("no such cluster")
			}
			// Nothing listens there: the worker finds the cluster unreachable and waits an hour.
			return &rest.Config{Host: "https://127.0.0.1:1"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	for _, token := range []string{"t1", "t1", "t2"} {
		if err := ws.Want("c1", Declaration{Source: "FleetPolicy/p"}, token); err != nil {
			t.Fatal(err)
		}
	}
	if asked["c1"] != 1 {
		t.Errorf("c1's config asked for %d times over three wants, want once", asked["c1"])
	}
	ws.Forget("c1")
	if err := ws.Want("c1", Declaration{Source: "FleetPolicy/p"}, "t3"); err != nil || asked["c1"] != 2 {
		t.Errorf("wanted again after it was forgotten: err %v, asked %d times, want 2", err, asked["c1"])
	}
	if err := ws.Want("bad", Declaration{Source: "FleetPolicy/p"}, "t1"); err == nil || !strings.Contains(err.Error(), "cluster bad: no such cluster") {
		t.Errorf("want in a cluster without a config: %v", err)
	}
	if got := ws.Clusters(); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("workers %v, want c1's only", got)
	}
}
