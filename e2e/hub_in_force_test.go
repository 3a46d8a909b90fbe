package e2e

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A synced declaration is in force in a cluster once Kyverno there reports its policies ready:
// status.clusters[].inForce turns true without a resync (the hub's is an hour away), for both
// Kyverno generations, and by then Kyverno enforces the policy: a violating Deployment is refused.
func TestHubReportsPoliciesInForce(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "in-force-e2e"
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster1, ns)
	enforced := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-in-force}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, marshalJSON(latestTagPolicy(t, "unused", ns, "Enforce").Object["spec"])))
	waitFleetPolicy(t, enforced.Name, "in force in cluster-1", allInForce)
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
	waitFleetPolicy(t, cel.Name, "in force in both clusters", allInForce)
}
