package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A PolicySet holding a ConstraintTemplate and its Constraint, in Enforce: the hub ships the
// template while the Constraint waits (Pending) for Gatekeeper to serve its kind, then the
// Constraint; the set is in force, and Gatekeeper refuses a Deployment without a team.
func TestGatekeeperPolicySetShipsTemplateThenConstraint(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name, kind = "gk-set", "gk-set", "E2eSetTeam"
	c4 := directClient(t, fleetOf(t).Cluster(gatekeeperCluster).Config)
	createNamespace(ctx, t, c4, ns)
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %[1]s}
spec:
  mode: Enforce
  placement: {clusters: [%[2]s]}
  source:
    inline:
%[6]s    - apiVersion: constraints.gatekeeper.sh/v1beta1
      kind: %[4]s
      metadata: {name: gk-set-team}
      spec:
        match:
          namespaces: [%[5]s]
          kinds: [{apiGroups: [apps], kinds: [Deployment]}]
        parameters: {labels: [team]}
`, name, gatekeeperCluster, strings.ToLower(kind), kind, ns, listItem(constraintTemplateYAML(kind, regoTarget(kind, "set: missing labels ")), 4)))
	logGatekeeperOnFailure(t, kind)
	waitPolicySet(t, name, "synced and in force in "+gatekeeperCluster, func(s *setView) error {
		for _, c := range s.Clusters {
			if c.Phase != policyhubv1.ClusterPhaseSynced || c.InForce == nil || !*c.InForce {
				return fmt.Errorf("cluster %s: %s (%s), in force %v", c.Name, c.Phase, c.Message, c.InForce)
			}
		}
		if len(s.Clusters) != 1 {
			return fmt.Errorf("%d clusters in status", len(s.Clusters))
		}
		return nil
	})
	err := c4.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `[gk-set-team] set: missing labels {"team"}`) {
		t.Errorf("a Deployment without a team: %v; want Gatekeeper's refusal", err)
	}
}
