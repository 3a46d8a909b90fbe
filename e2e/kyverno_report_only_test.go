package e2e

import (
	"fmt"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// What a preview's shadow would be (issue 46), on the real Kyverno 1.19: a ValidatingPolicy that
// says Deny, shipped in Enforce mode, with spec.evaluation.admission.enabled false and background
// scans on. Kyverno reports the Deployment that existed before it and the one created after it,
// and denies neither: a copy of a policy that reports and never refuses.
func TestKyvernoValidatingPolicyWithAdmissionOffReportsAndNeverDenies(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, name = "kyverno-report-only", "kyverno-report-only-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	if err := c1.Create(ctx, shopDeployment(ns, "before", "")); err != nil {
		t.Fatal(err)
	}
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  mode: Enforce
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: policies.kyverno.io/v1
    kind: ValidatingPolicy
    spec:
      validationActions: [Deny]
      evaluation:
        admission: {enabled: false}
        background: {enabled: true}
%s      validations:
      - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
        message: Deployments need a team label
`, name, deploymentsMatch(ns, 6)))
	waitFleetPolicy(t, name, "synced in cluster-1", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	fails := func(what string, n int64) {
		t.Helper()
		waitResults(t, name, what, func(fp *fleetView) error {
			s := clusterStatus(fp, "cluster-1")
			if s == nil || s.Results == nil || s.Results.Fail < n {
				return fmt.Errorf("cluster-1: %+v", s)
			}
			return nil
		})
	}
	// Kyverno runs it: the background scan reports the Deployment that was there before.
	fails("the existing Deployment reported failing", 1)
	// A violating Deployment created now is admitted, and reported.
	if err := c1.Create(ctx, shopDeployment(ns, "during", "")); err != nil {
		t.Fatalf("a ValidatingPolicy with admission off refused a Deployment: %v", err)
	}
	fails("the new Deployment reported failing too", 2)
}
