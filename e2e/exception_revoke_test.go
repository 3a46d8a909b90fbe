package e2e

import (
	"fmt"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An approver's revocation ends an exception as its end date would: within 60 s it is gone from
// every cluster, its state is Revoked, and Kyverno denies the workload again.
func TestExceptionRevokeRemovesIt(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-revoke-e2e"
	clusters := []string{"cluster-1", "cluster-2"}
	for _, c := range clusters {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	fp := enforcedLatestTag(t, "e2e-exception-revoke", ns)
	approver := approverClient(t, "security@corp")
	ex := requestException(t, directClient(t, fleetOf(t).Hub.Config), fmt.Sprintf(`
metadata: {name: revoked, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], selector: {matchLabels: {app: web-latest}}}
  clusters: {clusterSelector: {matchExpressions: [{key: env, operator: In, values: [staging, prod]}]}}
  owner: platform
  reason: until the incident is over
  ticket: INC-7
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(24*time.Hour)))
	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitException(t, ex, "Active in both clusters", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != 2 {
			return fmt.Errorf("inForce %d, want 2", ex.Status.InForce)
		}
		return nil
	})
	latest := deployment(ns, "web-latest", "nginx:latest") // labelled app=web-latest
	for _, c := range clusters {
		admittedEventually(ctx, t, c, latest, "the excepted Deployment admitted in "+c)
	}

	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionRevoked, "security@corp"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	revokedAt := time.Now()
	name := policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)
	eventually(t, 60*time.Second, 500*time.Millisecond, "the exception gone from both clusters", func() error {
		for _, c := range clusters {
			if got := kyvernoExceptions(ctx, t, c, "kyverno.io/v2")[name]; got != nil {
				return fmt.Errorf("still in %s", c)
			}
		}
		return nil
	})
	t.Logf("removed from both clusters %s after the revocation", time.Since(revokedAt).Round(time.Millisecond))
	waitException(t, ex, "Revoked", exceptionState(policyhubv1.ExceptionRevoked))
	for _, c := range clusters {
		assertKyvernoDenial(t, c+" after the revocation", deniedEventually(ctx, t, c, latest, "denied again in "+c), ns, fp.Name)
	}
}
