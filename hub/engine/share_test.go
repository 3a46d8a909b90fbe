package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/work"
)

// A replica keeps its own clusters' entries fresh and the others' as read; the declaration's
// writer counts another replica's entry of an older generation, or none yet, as Pending.
func TestShareSplitsEntriesBetweenReplicas(t *testing.T) {
	names, a := twoReplicas()
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
	own := sh.answered([]policyhubv1.ClusterStatus{{Name: mine[0], Phase: policyhubv1.ClusterPhaseSynced}}, []Outcome{{Cluster: mine[0]}}, 2)
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
		if o.Pending != (o.Result.Phase == policyhubv1.ClusterPhasePending) || o.Result.Source != "FleetPolicy/p" {
			t.Errorf("outcome %s: pending %v, phase %s, source %s", o.Cluster, o.Pending, o.Result.Phase, o.Result.Source)
		}
	}
	single := share{single: true, writes: true}
	if !single.owns("anything") || single.others(before) != nil {
		t.Error("a single replica must own every cluster and see no other replica's entries")
	}
}

// twoReplicas assigns six clusters over replicas r-a and r-b.
func twoReplicas() ([]string, shard.Assignment) {
	names := []string{"c-0", "c-1", "c-2", "c-3", "c-4", "c-5"}
	var clusters []shard.Cluster
	for _, n := range names {
		clusters = append(clusters, shard.Cluster{Name: n})
	}
	return names, shard.Assign(clusters, []string{"r-a", "r-b"}, 0)
}

// A PolicySet's members that need attention are counted over every cluster, also those another
// replica works: their owners keep the objects they could not apply in their entries (without
// diffs), and the set's writer folds them in with its own clusters' results.
func TestOthersOutcomesKeepTheirProblems(t *testing.T) {
	names, a := twoReplicas()
	mine, theirs := a.Owned("r-a"), a.Owned("r-b")
	refused := policyhubv1.PlannedChange{Action: string(policyhubv1.ClusterPhaseFailed), APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy",
		Name: "every-kind", Diff: "--- a long diff", Message: "admission webhook denied the request"}
	failedIn := func(cluster string) Outcome {
		return Outcome{Cluster: cluster, Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseFailed,
			Problems: []policyhubv1.PlannedChange{refused}}}
	}

	// r-b, not the writer, keeps its clusters' problems in its entries.
	rb := share{me: "r-b", assignment: a}
	var rbOwn []policyhubv1.ClusterStatus
	var rbOutcomes []Outcome
	for _, n := range theirs {
		rbOwn = append(rbOwn, policyhubv1.ClusterStatus{Name: n, Phase: policyhubv1.ClusterPhaseFailed})
		rbOutcomes = append(rbOutcomes, failedIn(n))
	}
	rbOwn = rb.answered(rbOwn, rbOutcomes, 3)
	for _, c := range rbOwn {
		if len(c.Problems) != 1 || c.Problems[0].Name != "every-kind" || c.Problems[0].Diff != "" || c.ObservedGeneration != 3 {
			t.Fatalf("r-b's entry %+v: want the refused member without its diff, at generation 3", c)
		}
	}

	// r-a writes the set's status: its own outcomes and r-b's entries, as read.
	ra := share{me: "r-a", assignment: a, writes: true}
	var kept []Outcome
	var raOwn []policyhubv1.ClusterStatus
	for _, n := range mine {
		kept = append(kept, failedIn(n))
		raOwn = append(raOwn, policyhubv1.ClusterStatus{Name: n, Phase: policyhubv1.ClusterPhaseFailed})
	}
	raOwn = ra.answered(raOwn, kept, 3)
	objects := map[string][]*unstructured.Unstructured{}
	for _, n := range names {
		objects[n] = nil
	}
	_, theirOutcomes := ra.view(withOthers(raOwn, ra.others(withOthers(raOwn, rbOwn))), &render.Targets{Source: "PolicySet/s", Objects: objects}, 3)
	// The writer's outcomes of r-b's clusters carry their problems (a set's member attention counts them).
	if len(theirOutcomes) != len(theirs) {
		t.Fatalf("the writer's outcomes of r-b's clusters: %+v, want one per cluster of %v", theirOutcomes, theirs)
	}
	for _, o := range theirOutcomes {
		if o.Pending || len(o.Result.Problems) != 1 || o.Result.Problems[0].Name != "every-kind" || o.Result.Problems[0].Diff != "" {
			t.Errorf("the writer's outcome of %s: %+v; want the refused member without its diff", o.Cluster, o.Result)
		}
	}

	// One replica writes the same entry as many: the generation it answers and its problems.
	single := share{single: true, writes: true}
	if got := single.answered([]policyhubv1.ClusterStatus{{Name: "c-0"}}, []Outcome{failedIn("c-0")}, 3); got[0].ObservedGeneration != 3 || len(got[0].Problems) != 1 {
		t.Errorf("a single replica's entry: generation %d, problems %+v; want 3 and the refused object", got[0].ObservedGeneration, got[0].Problems)
	}
}
