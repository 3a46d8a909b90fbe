package controllers

import (
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/work"
)

// The writer of a set's status counts a member failed in every cluster: in its own (its outcomes)
// and in the other replicas' (their outcomes as the engine reads them from their entries: problems
// without diffs).
func TestMemberAttentionCountsOtherReplicasClusters(t *testing.T) {
	names := []string{"c-0", "c-1", "c-2", "c-3", "c-4", "c-5"}
	refused := policyhubv1.PlannedChange{Action: string(policyhubv1.ClusterPhaseFailed), APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy",
		Name: "every-kind", Diff: "--- a long diff", Message: "admission webhook denied the request"}
	var outcomes []engine.Outcome
	for i, n := range names {
		problem := refused
		if i%2 == 1 {
			problem.Diff = "" // another replica's entry keeps no diff
		}
		outcomes = append(outcomes, engine.Outcome{Cluster: n, Result: &work.DeclarationResult{Phase: policyhubv1.ClusterPhaseFailed,
			Problems: []policyhubv1.PlannedChange{problem}}})
	}
	attention, failed, _ := memberAttention(outcomes)
	if len(attention) != 1 || attention[0].Clusters != int32(len(names)) || failed != 1 {
		t.Errorf("attention %+v, %d failed: want every-kind failed in all %d clusters", attention, failed, len(names))
	}
}
