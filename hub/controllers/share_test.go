package controllers

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/shard"
)

// A replica keeps its own clusters' entries fresh and the others' as read; the declaration's
// writer counts another replica's entry of an older generation, or none yet, as Pending.
func TestShareSplitsEntriesBetweenReplicas(t *testing.T) {
	names := []string{"c-0", "c-1", "c-2", "c-3", "c-4", "c-5"}
	var clusters []shard.Cluster
	for _, n := range names {
		clusters = append(clusters, shard.Cluster{Name: n})
	}
	a := shard.Assign(clusters, []string{"r-a", "r-b"}, 0)
	mine := a.Owned("r-a")
	theirs := a.Owned("r-b")
	if len(mine) == 0 || len(theirs) < 2 {
		t.Fatalf("assignment r-a %v, r-b %v: the test needs clusters on both", mine, theirs)
	}
	sh := share{me: "r-a", assignment: a, writes: true}
	for _, n := range names {
		if sh.owns(n) != slices.Contains(mine, n) {
			t.Errorf("owns(%s) = %v", n, sh.owns(n))
		}
	}
	before := []policyhubv1.ClusterStatus{
		{Name: mine[0], Phase: policyhubv1.ClusterPhaseFailed, ObservedGeneration: 1},
		{Name: theirs[0], Phase: policyhubv1.ClusterPhaseSynced, ObservedGeneration: 2},
		{Name: theirs[1], Phase: policyhubv1.ClusterPhaseSynced, ObservedGeneration: 1},
	}
	others := sh.others(before)
	if len(others) != 2 || others[0].Name != theirs[0] || others[1].Name != theirs[1] {
		t.Fatalf("others = %+v, want r-b's two entries as read", others)
	}
	own := sh.answered([]policyhubv1.ClusterStatus{{Name: mine[0], Phase: policyhubv1.ClusterPhaseSynced}}, []clusterOutcome{{cluster: mine[0]}}, 2)
	if own[0].ObservedGeneration != 2 {
		t.Errorf("this replica's answered entry is at generation %d, want 2", own[0].ObservedGeneration)
	}
	objects := map[string][]*unstructured.Unstructured{}
	for _, n := range names {
		objects[n] = nil
	}
	targets := &render.Targets{Source: "FleetPolicy/p", Objects: objects}
	view, outcomes := sh.view(withOthers(own, others), targets, 2)
	phases := map[string]policyhubv1.ClusterPhase{}
	for _, c := range view {
		phases[c.Name] = c.Phase
	}
	if len(view) != 1+len(theirs) || phases[mine[0]] != policyhubv1.ClusterPhaseSynced ||
		phases[theirs[0]] != policyhubv1.ClusterPhaseSynced || phases[theirs[1]] != policyhubv1.ClusterPhasePending {
		t.Errorf("writer's view %v: want r-a's Synced, r-b's generation-2 entry Synced, its generation-1 entry Pending, every one of r-b's targets listed", phases)
	}
	for _, n := range theirs[2:] {
		if phases[n] != policyhubv1.ClusterPhasePending {
			t.Errorf("%s (r-b's, not written yet) is %s in the writer's view, want Pending", n, phases[n])
		}
	}
	if len(outcomes) != len(theirs) {
		t.Errorf("%d outcomes of r-b's clusters, want %d", len(outcomes), len(theirs))
	}
	for _, o := range outcomes {
		if o.pending != (o.result.Phase == policyhubv1.ClusterPhasePending) || o.result.Source != "FleetPolicy/p" {
			t.Errorf("outcome %s: pending %v, phase %s, source %s", o.cluster, o.pending, o.result.Phase, o.result.Source)
		}
	}
	single := share{single: true, writes: true}
	if !single.owns("anything") || single.others(before) != nil {
		t.Error("a single replica must own every cluster and see no other replica's entries")
	}
}
