package e2e

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A PolicySet whose member has the name of a policy a FleetPolicy already runs in the cluster is a
// Conflict there, never a fight: the FleetPolicy keeps its object, unwritten; the set's other
// member is applied, and status.attentionMembers names the contested member and its owner.
func TestPolicySetMemberClaimedByAFleetPolicyConflicts(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	createFleetPolicy(t, `
metadata: {name: e2e-pset-owner}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    metadata: {name: pset-contested}
    spec: `+indentedSpec("pset-owner"))
	waitFleetPolicy(t, "e2e-pset-owner", "synced in cluster-1", allInForce)
	owned := clusterPolicy(t, "cluster-1", "pset-contested")

	const name = "e2e-pset-claimant"
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1]}
  source:
    inline:
    - apiVersion: kyverno.io/v1
      kind: ClusterPolicy
      metadata: {name: pset-contested, labels: {from: set}}
      spec: %s
    - apiVersion: kyverno.io/v1
      kind: ClusterPolicy
      metadata: {name: pset-uncontested}
      spec: %s
`, name, indentedSpec("pset-claimant"), indentedSpec("pset-claimant")))
	set := waitPolicySet(t, name, "a conflict in cluster-1", func(s *setView) error {
		if len(s.Clusters) != 1 || s.Clusters[0].Phase != policyhubv1.ClusterPhaseConflict || s.Clusters[0].Actions.Conflict != 1 || s.Clusters[0].Actions.Created+s.Clusters[0].Actions.Unchanged != 1 {
			return fmt.Errorf("clusters %+v", s.Clusters)
		}
		if len(s.Status.AttentionMembers) != 1 {
			return fmt.Errorf("attention members %+v", s.Status.AttentionMembers)
		}
		return nil
	})
	got := set.Status.AttentionMembers[0]
	if got.Name != "pset-contested" || got.Action != "Conflict" || !strings.Contains(got.Message, "FleetPolicy/e2e-pset-owner") {
		t.Errorf("attention member %+v: want pset-contested in Conflict, naming FleetPolicy/e2e-pset-owner", got)
	}
	if want := (policyhubv1.MemberCounts{Total: 2, Conflict: 1, ByEngine: []policyhubv1.EngineCount{{Engine: policyhubv1.EngineKyverno, Count: 2}}}); !reflect.DeepEqual(set.Status.Members, want) {
		t.Errorf("members %+v", set.Status.Members)
	}
	if clusterPolicy(t, "cluster-1", "pset-uncontested") == nil {
		t.Error("the uncontested member was not applied")
	}
	// The FleetPolicy stays Synced and its object as it wrote it, across a sync of both.
	waitFleetPolicy(t, "e2e-pset-owner", "still synced", allInForce)
	now := clusterPolicy(t, "cluster-1", "pset-contested")
	if now.GetResourceVersion() != owned.GetResourceVersion() || now.GetAnnotations()[policyhubv1.AnnotationSource] != "FleetPolicy/e2e-pset-owner" || now.GetLabels()["from"] != "" {
		t.Errorf("the contested policy changed: resourceVersion %s (was %s), annotations %v, labels %v",
			now.GetResourceVersion(), owned.GetResourceVersion(), now.GetAnnotations(), now.GetLabels())
	}
}
