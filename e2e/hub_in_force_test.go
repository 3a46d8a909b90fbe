package e2e

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A synced declaration is in force in a cluster once Kyverno there reports its policies ready:
// status.clusters[].inForce turns true without a resync (the hub's is an hour away), for both
// Kyverno generations, and by then Kyverno enforces the policy: a violating Deployment is refused.
func TestHubReportsPoliciesInForce(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "in-force-e2e"
	cluster1 := directClient(t, testFleet.Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster1, ns)
	inForce := func(fp *policyhubv1.FleetPolicy) error {
		for _, c := range fp.Status.Clusters {
			if c.Phase != policyhubv1.ClusterPhaseSynced || c.InForce == nil || !*c.InForce {
				return fmt.Errorf("%s: phase %s, inForce %v", c.Name, c.Phase, c.InForce)
			}
		}
		if len(fp.Status.Clusters) == 0 {
			return fmt.Errorf("no clusters in status")
		}
		return nil
	}

	enforced := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-in-force}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, marshalJSON(latestTagPolicy(t, "unused", ns, "Enforce").Object["spec"])))
	waitFleetPolicy(t, enforced.Name, "in force in cluster-1", inForce)
	err := cluster1.Create(ctx, deployment(ns, "web-latest", "nginx:latest"), client.DryRunAll)
	assertKyvernoDenial(t, "dry-run create once in force", err, ns, enforced.Name)

	cel := createFleetPolicy(t, `
metadata: {name: e2e-in-force-cel}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
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
`)
	waitFleetPolicy(t, cel.Name, "in force in both clusters", inForce)
}
