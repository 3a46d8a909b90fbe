package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception that can no longer be rendered as its spec says is taken out of every cluster,
// not left exempting as it was: its FleetPolicy becomes a ValidatingPolicy, of which an exception
// cannot name rules; the exception is Stalled naming spec.target.rules, and its kyverno.io
// PolicyException is pruned.
func TestExceptionRefusedIsPruned(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-refused-e2e"
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-1").Config), ns)
	fp := enforcedLatestTag(t, "e2e-exception-refused", ns)
	ex := approvedException(t, fmt.Sprintf(`
metadata: {name: refused, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s, rules: [require-pinned-image]}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {names: [cluster-1]}
  owner: platform
  reason: one rule, one Deployment
  ticket: SEC-422
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	waitException(t, ex, "in force in cluster-1", func(ex *policyhubv1.FleetPolicyException) error {
		if ex.Status.InForce != 1 {
			return fmt.Errorf("inForce %d", ex.Status.InForce)
		}
		return nil
	})
	name := policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)
	if kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name] == nil {
		t.Fatal("no exception in cluster-1")
	}

	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy",
			Spec: &runtime.RawExtension{Raw: []byte(`{"validationActions":["Deny"],"matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["deployments"]}]},"validations":[{"expression":"true"}]}`)}}
	})
	waitException(t, ex, "Stalled and in force nowhere", func(ex *policyhubv1.FleetPolicyException) error {
		stalled := meta.FindStatusCondition(ex.Status.Conditions, policyhubv1.ConditionStalled)
		if stalled == nil || stalled.Status != "True" || stalled.Reason != "InvalidException" || !strings.Contains(stalled.Message, "spec.target.rules") || ex.Status.InForce != 0 {
			return fmt.Errorf("Stalled %+v, inForce %d", stalled, ex.Status.InForce)
		}
		return nil
	})
	for _, apiVersion := range []string{"kyverno.io/v2", "policies.kyverno.io/v1"} {
		if kyvernoExceptions(ctx, t, "cluster-1", apiVersion)[name] != nil {
			t.Errorf("cluster-1 still holds a %s exception the hub refuses to render", apiVersion)
		}
	}
}
