package e2e

import (
	"fmt"
	"testing"
	"time"
)

// Kyverno's CEL generation end to end: a FleetPolicy of a ValidatingPolicy that says Deny, with
// spec.mode Audit, lets a violating Deployment in (the mode override rewrote its
// validationActions), and Kyverno's results for it (report source KyvernoValidatingPolicy) reach
// the FleetPolicy's status and the hub's /metrics under the ValidatingPolicy kind.
func TestAgentValidatingPolicyAuditResultsInStatusAndMetrics(t *testing.T) {
	inParallel(t)
	hub := startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, name = "agent-audit-cel", "agent-audit-cel-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  mode: Audit
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: policies.kyverno.io/v1
    kind: ValidatingPolicy
    spec:
      validationActions: [Deny]
%s      validations:
      - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
        message: Deployments need a team label
`, name, deploymentsMatch(ns, 6)))
	waitFleetPolicy(t, name, "in force in cluster-1", allInForce)

	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatalf("spec.mode Audit must let the Deployment in, whatever the template's validationActions: %v", err)
	}
	waitResults(t, name, "fail ≥ 1 in cluster-1", func(fp *fleetView) error {
		s1 := clusterStatus(fp, "cluster-1")
		if s1 == nil || s1.Results == nil || s1.Results.Fail < 1 {
			return fmt.Errorf("cluster-1: %+v", s1)
		}
		return nil
	})
	eventually(t, 30*time.Second, 500*time.Millisecond, "the ValidatingPolicy's fail series on the hub's /metrics", func() error {
		series := map[string]string{"cluster": "cluster-1", "policy": name, "kind": "ValidatingPolicy", "result": "fail"}
		if v, ok := hub.scrape(t, "policyhub_policy_results", series); !ok || v < 1 {
			return fmt.Errorf("fail series %v (present %v)", v, ok)
		}
		return nil
	})
}
