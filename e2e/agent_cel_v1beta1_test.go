package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The agent of a cluster whose Kyverno (1.16) serves the CEL kinds only as v1beta1 reports the
// results of a v1beta1 ValidatingPolicy: Kyverno 1.16's reports controller writes a real
// PolicyReport for a violating ConfigMap, and the cluster's summary on the hub counts the fail
// under the ValidatingPolicy kind with the title and severity of the policy's annotations, which
// the agent reads from the policy at the version the cluster serves.
func TestAgentReportsCELPolicyServedAsV1beta1(t *testing.T) {
	inParallel(t)
	startAgent(t, kyverno116Cluster)
	ctx := testContext(t)
	const ns, name = "agent-cel-v1beta1", "agent-cel-v1beta1-team"
	c := directClient(t, fleetOf(t).Cluster(kyverno116Cluster).Config)
	createNamespace(ctx, t, c, ns)
	policy := object(t, fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1beta1
kind: ValidatingPolicy
metadata:
  name: %s
  annotations:
    policies.kyverno.io/title: ConfigMaps name their team
    policies.kyverno.io/severity: high
spec: %s
`, name, marshalJSON(teamConfigMapPolicySpec("Audit", ns))))
	apply(ctx, t, c, policy)
	t.Cleanup(func() { _ = c.Delete(ctx, policy) })
	eventually(t, 60*time.Second, 500*time.Millisecond, "Kyverno 1.16 reports the ValidatingPolicy ready", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return err
		}
		if ready, _, _ := unstructured.NestedBool(policy.Object, "status", "conditionStatus", "ready"); !ready {
			return fmt.Errorf("status %v", policy.Object["status"])
		}
		return nil
	})
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-team"}}); err != nil {
		t.Fatalf("an Audit policy must let the ConfigMap in: %v", err)
	}

	eventually(t, 90*time.Second, time.Second, "the summary of "+kyverno116Cluster+" counts the ValidatingPolicy's fail with its title and severity", func() error {
		s, err := hubSummaryOf(t, kyverno116Cluster)
		if err != nil {
			return err
		}
		for _, p := range s.Spec.Policies {
			if p.Name != name {
				continue
			}
			if p.Kind != "ValidatingPolicy" || p.Results.Fail < 1 || p.Title != "ConfigMaps name their team" || p.Severity != "high" {
				return fmt.Errorf("policy %+v", p)
			}
			return nil
		}
		return fmt.Errorf("policy %s not in the summary (%d policies)", name, len(s.Spec.Policies))
	})
}
