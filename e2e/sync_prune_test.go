package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// Pruning deletes only this declaration's objects that it no longer renders — also when the
// template's kind changed — never another declaration's, and keeps them when prune is off.
func TestSyncPrunesOnlyOwnObjectsNoLongerRendered(t *testing.T) {
	ctx := testContext(t)
	s := newSyncer(t)
	cluster := gatewayCluster(t, "cluster-1")
	old, source := renderFleetPolicy(t, "e2e-prune", auditTemplate("prune"), nil)
	neighbour, neighbourSource := renderFleetPolicy(t, "e2e-prune-neighbour", auditTemplate("prune-neighbour"), nil)
	onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{old}, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: neighbourSource, Objects: []*unstructured.Unstructured{neighbour}, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() {
		s.Sync(ctx, cluster, []work.Declaration{{Source: source, Prune: true}, {Source: neighbourSource, Prune: true}})
	})

	// The declaration now renders a ValidatingPolicy instead of its ClusterPolicy.
	replacement, _ := renderFleetPolicy(t, "e2e-prune", `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
spec:
  validationActions: [Audit]
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  validations:
  - expression: "true"
`, nil)
	withoutPrune := s.Sync(ctx, cluster, []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{replacement}, Prune: false}})
	if d := onlyResult(t, withoutPrune, policyhubv1.ClusterPhaseSynced); d.Actions.Created != 1 || d.Actions.Deleted != 0 {
		t.Errorf("prune off: actions %+v, want created 1, deleted 0", d.Actions)
	}
	if _, err := liveObject(t, "cluster-1", old); err != nil {
		t.Errorf("prune off deleted the old ClusterPolicy: %v", err)
	}

	d := onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{replacement}, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	if d.Actions.Deleted != 1 || d.Actions.Unchanged != 1 {
		t.Errorf("prune on: actions %+v, want deleted 1 (the ClusterPolicy), unchanged 1", d.Actions)
	}
	if _, err := liveObject(t, "cluster-1", old); err == nil {
		t.Errorf("the ClusterPolicy the declaration no longer renders is still there")
	}
	if _, err := liveObject(t, "cluster-1", neighbour); err != nil {
		t.Errorf("another declaration's policy was pruned: %v", err)
	}
}
