package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception from a policies.kyverno.io ValidatingPolicy becomes a policies.kyverno.io/v1
// PolicyException, with Kyverno's own expiresAt and properties (owner, ticket, reason,
// approved-by) and the resources as CEL match conditions (the hub's and the exception's own):
// once approved, Kyverno admits the excepted Deployment, and only it.
func TestExceptionFromCELPolicy(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-cel-e2e"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	fp := createFleetPolicy(t, noLatestValidatingPolicy("e2e-exception-cel", ns))
	waitFleetPolicy(t, fp.Name, "in force in both clusters", allInForce)
	latest := deployment(ns, "web-latest", "nginx:latest")
	denial := deniedEventually(ctx, t, "cluster-2", latest, "Kyverno denies nginx:latest in cluster-2")
	if !strings.Contains(denial.Error(), "the image tag latest is not allowed") {
		t.Fatalf("denial %q is not the ValidatingPolicy's", denial)
	}

	approver := approverClient(t, "security@corp")
	expires := expiresIn(24 * time.Hour)
	ex := requestException(t, directClient(t, fleetOf(t).Hub.Config), fmt.Sprintf(`
metadata: {name: cel-vendor, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources:
    namespaces: [%s]
    kinds: [apps/v1/Deployment]
    names: ["web-lat*"]
    matchConditions:
    - {name: nginx-only, expression: "object.spec.template.spec.containers.all(c, c.image.startsWith('nginx:'))"}
  clusters: {names: [cluster-2]}
  owner: platform
  reason: the vendor's image is only published as latest
  ticket: SEC-77
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expires))
	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitException(t, ex, "Active in cluster-2", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != 1 || ex.Status.Policy != "ValidatingPolicy/"+fp.Name {
			return fmt.Errorf("inForce %d, policy %q", ex.Status.InForce, ex.Status.Policy)
		}
		return nil
	})
	rendered := kyvernoExceptions(ctx, t, "cluster-2", "policies.kyverno.io/v1")[policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)]
	if rendered == nil {
		t.Fatalf("no policies.kyverno.io/v1 PolicyException in cluster-2")
	}
	if got, _, _ := unstructured.NestedString(rendered.Object, "spec", "expiresAt"); got != expires {
		t.Errorf("spec.expiresAt = %q, want %s", got, expires)
	}
	props, _, _ := unstructured.NestedStringMap(rendered.Object, "spec", "properties")
	if props["owner"] != "platform" || props["ticket"] != "SEC-77" || props["approved-by"] != "security@corp" {
		t.Errorf("spec.properties = %v", props)
	}
	if got := kyvernoExceptions(ctx, t, "cluster-1", "policies.kyverno.io/v1"); len(got) != 0 {
		t.Errorf("cluster-1, not listed, holds PolicyExceptions %v", keysOf(got))
	}
	admittedEventually(ctx, t, "cluster-2", latest, "the excepted Deployment admitted in cluster-2")
	other := deployment(ns, "web-latest", "nginx:latest")
	other.Name = "api-latest"
	if err := directClient(t, fleetOf(t).Cluster("cluster-2").Config).Create(ctx, other, client.DryRunAll); err == nil {
		t.Errorf("a Deployment the exception does not name was admitted in cluster-2")
	}
	if err := directClient(t, fleetOf(t).Cluster("cluster-1").Config).Create(ctx, latest.DeepCopy(), client.DryRunAll); err == nil {
		t.Errorf("the Deployment was admitted in cluster-1, not listed")
	}
}
