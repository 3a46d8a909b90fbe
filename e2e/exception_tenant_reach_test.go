package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A tenant's exception reaches only what the hub admin granted the tenant: one naming a namespace
// not granted goes to no cluster (Stalled, NotGranted, naming it), even approved; one naming no
// namespace is confined to the namespace named like the tenant's own; wildcards are refused.
func TestExceptionWithinTenantReach(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, granted, other = "team-reach", "reach-granted-e2e", "reach-other-e2e"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	grantTenant(ctx, t, tenant, granted) // both clusters; namespaces team-reach and reach-granted-e2e
	fp := enforcedLatestTag(t, "e2e-exception-reach", granted)
	requester := tenantClient(t, tenant, "dev@team-reach")
	approver := approverClient(t, "security@corp")
	request := func(name, resources string) *policyhubv1.FleetPolicyException {
		ex := requestException(t, requester, fmt.Sprintf(`
metadata: {name: %s, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: %s
  clusters: {clusterSelector: {}}
  owner: team-reach
  reason: reach
  ticket: R-1
  expiresAt: %s`, name, tenant, fp.Name, resources, expiresIn(time.Hour)))
		if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
			t.Fatalf("approve %s: %v", name, err)
		}
		return ex
	}
	// Approved, but in force nowhere: Invalid, not Active (exception_ungrantable_not_active_test.go).
	stalledOn := func(want string) func(*policyhubv1.FleetPolicyException) error {
		return func(ex *policyhubv1.FleetPolicyException) error {
			if err := exceptionState(policyhubv1.ExceptionInvalid)(ex); err != nil {
				return err
			}
			stalled := findExceptionCondition(ex, policyhubv1.ConditionStalled)
			if stalled == nil || stalled.Status != "True" || !strings.Contains(stalled.Message, want) {
				return fmt.Errorf("Stalled = %+v, want True naming %s", stalled, want)
			}
			return nil
		}
	}

	outside := request("outside", fmt.Sprintf("{namespaces: [%s, %s], names: [web-latest]}", granted, other))
	waitException(t, outside, "not granted", stalledOn("cluster-1/"+other))
	wildcard := request("wildcard", "{namespaces: [reach-*], names: [web-latest]}")
	waitException(t, wildcard, "refused", stalledOn(`spec.resources.namespaces: "reach-*" has a wildcard`))
	own := request("own", "{names: [web-latest]}")
	waitException(t, own, "in force in both clusters", func(ex *policyhubv1.FleetPolicyException) error {
		if ex.Status.InForce != 2 {
			return fmt.Errorf("inForce %d, want 2", ex.Status.InForce)
		}
		return nil
	})
	for _, c := range []string{"cluster-1", "cluster-2"} {
		held := kyvernoExceptions(ctx, t, c, "kyverno.io/v2")
		for _, ex := range []*policyhubv1.FleetPolicyException{outside, wildcard} {
			if held[policyhubv1.ExceptionObjectName(tenant, ex.Name)] != nil {
				t.Errorf("%s holds exception %s, beyond the tenant's reach", c, ex.Name)
			}
		}
		obj := held[policyhubv1.ExceptionObjectName(tenant, own.Name)]
		if obj == nil {
			t.Fatalf("%s lacks exception %s", c, own.Name)
		}
		match, _, _ := unstructured.NestedSlice(obj.Object, "spec", "match", "any")
		if got := fmt.Sprint(match); !strings.Contains(got, "namespaces:["+tenant+"]") {
			t.Errorf("%s: exception %s matches %s, want only namespace %s", c, own.Name, got, tenant)
		}
	}
}
