package e2e

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A member the clusters' Kyverno refuses fails alone: the set's other member is applied and in
// force, the cluster is Failed with Kyverno's message, and status.attentionMembers names the
// refused member with Kyverno's words, in both clusters.
func TestPolicySetMemberKyvernoRefusesFailsAlone(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	const name = "e2e-pset-refused"
	refused := object(t, kyvernoRefusedTemplate)
	refused.SetName("pset-every-kind")
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  source:
    inline:
    - %s
    - apiVersion: kyverno.io/v1
      kind: ClusterPolicy
      metadata: {name: pset-accepted}
      spec: %s
`, name, marshalJSON(refused.Object), indentedSpec("pset-refused")))

	set := waitPolicySet(t, name, "the refused member failed in both clusters, alone", func(s *setView) error {
		if len(s.Clusters) != 2 {
			return fmt.Errorf("%d clusters", len(s.Clusters))
		}
		for _, c := range s.Clusters {
			if c.Phase != policyhubv1.ClusterPhaseFailed || c.Actions.Failed != 1 || c.Actions.Created+c.Actions.Unchanged != 1 {
				return fmt.Errorf("%s: phase %s actions %+v, want Failed with one member failed and one applied", c.Name, c.Phase, c.Actions)
			}
		}
		if len(s.Status.AttentionMembers) != 1 {
			return fmt.Errorf("attention members %+v", s.Status.AttentionMembers)
		}
		return nil
	})
	got := set.Status.AttentionMembers[0]
	if got.Name != "pset-every-kind" || got.Kind != "ClusterPolicy" || got.Action != "Failed" || got.Clusters != 2 ||
		!strings.Contains(got.Message, `admission webhook "validate-policy.kyverno.svc" denied the request`) ||
		!strings.Contains(got.Message, "wildcard policy not allowed in background mode") {
		t.Errorf("attention member %+v: want pset-every-kind Failed in 2 clusters with Kyverno's message", got)
	}
	if want := (policyhubv1.MemberCounts{Total: 2, Failed: 1, ByEngine: []policyhubv1.EngineCount{{Engine: policyhubv1.EngineKyverno, Count: 2}}}); !reflect.DeepEqual(set.Status.Members, want) {
		t.Errorf("members %+v, want 2 members, 1 failed", set.Status.Members)
	}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		if clusterPolicy(t, cluster, "pset-accepted") == nil {
			t.Errorf("%s: the accepted member was not applied", cluster)
		}
		if clusterPolicy(t, cluster, "pset-every-kind") != nil {
			t.Errorf("%s: the refused member exists", cluster)
		}
	}
}
