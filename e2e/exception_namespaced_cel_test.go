package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception from a NamespacedValidatingPolicy takes effect and ends like any other: admitted
// within a minute of its approval, denied again within a minute of its revocation (Kyverno
// recompiles a namespaced CEL policy only on its own events, kyverno#17605: the hub makes one).
func TestExceptionFromNamespacedCELPolicy(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-nvpol-e2e"
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-1").Config), ns)
	fp := createNamespacedNoLatestPolicy(t, "e2e-exception-nvpol", ns)
	waitFleetPolicy(t, fp.Name, "in force in cluster-1", allInForce)
	latest := deployment(ns, "web-latest", "nginx:latest")
	if denial := deniedEventually(ctx, t, "cluster-1", latest, "denied by the namespaced policy"); !strings.Contains(denial.Error(), "the image tag latest is not allowed") {
		t.Fatalf("denial %q is not the policy's", denial)
	}

	approver := approverClient(t, "security@corp")
	ex := requestException(t, directClient(t, fleetOf(t).Hub.Config), fmt.Sprintf(`
metadata: {name: nvpol, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {names: [cluster-1]}
  owner: platform
  reason: namespaced CEL policies recompile on their own events only
  ticket: K-17605
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitException(t, ex, "Active", exceptionState(policyhubv1.ExceptionActive))
	approved := time.Now()
	admittedEventually(ctx, t, "cluster-1", latest, "admitted once the exception is in force")
	t.Logf("admitted %s after the approval", time.Since(approved).Round(time.Millisecond))

	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionRevoked, "security@corp"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	revoked := time.Now()
	deniedEventually(ctx, t, "cluster-1", latest, "denied again after the revocation")
	t.Logf("denied again %s after the revocation", time.Since(revoked).Round(time.Millisecond))
}

// createNamespacedNoLatestPolicy creates a FleetPolicy for cluster-1 whose template is a
// NamespacedValidatingPolicy in namespace denying Deployments with a :latest image.
func createNamespacedNoLatestPolicy(t *testing.T, name, namespace string) *policyhubv1.FleetPolicy {
	t.Helper()
	return createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: policies.kyverno.io/v1
    kind: NamespacedValidatingPolicy
    metadata: {namespace: %s}
    spec:
      validationActions: [Deny]
      matchConstraints:
        resourceRules:
        - apiGroups: [apps]
          apiVersions: [v1]
          operations: [CREATE, UPDATE]
          resources: [deployments]
      validations:
      - expression: "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))"
        message: "the image tag latest is not allowed: pin a version"`, name, namespace))
}
