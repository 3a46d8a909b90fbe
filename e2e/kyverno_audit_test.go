package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An Audit ClusterPolicy applied through the gateway makes the managed cluster's real Kyverno
// report a Deployment that existed before the policy: a PolicyReport about it with fail ≥ 1.
func TestKyvernoAuditPolicyThroughGatewayReportsExistingViolation(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	const ns = "audit-e2e"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)
	violating := deployment(ns, "web-latest", "nginx:latest")
	if err := cluster.Create(ctx, violating); err != nil {
		t.Fatalf("create the violating Deployment before the policy: %v", err)
	}

	policy := latestTagPolicy(t, "e2e-disallow-latest-audit", ns, "Audit")
	apply(ctx, t, gatewayClient(t, "cluster-1"), policy)
	t.Cleanup(func() { _ = gatewayClient(t, "cluster-1").Delete(ctx, policy) })

	// Kyverno writes one PolicyReport per resource, scoped to it; the background scan finds the
	// Deployment that predates the policy.
	eventually(t, 3*time.Minute, 2*time.Second, "a PolicyReport with fail ≥ 1 for the pre-existing Deployment", func() error {
		reports := &unstructured.UnstructuredList{}
		reports.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReportList"})
		if err := cluster.List(ctx, reports, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, r := range reports.Items {
			kind, _, _ := unstructured.NestedString(r.Object, "scope", "kind")
			name, _, _ := unstructured.NestedString(r.Object, "scope", "name")
			if kind != "Deployment" || name != violating.Name {
				continue
			}
			fail, _, _ := unstructured.NestedInt64(r.Object, "summary", "fail")
			if fail < 1 {
				return fmt.Errorf("PolicyReport %s about Deployment %s has summary.fail=%d", r.GetName(), name, fail)
			}
			results, _, _ := unstructured.NestedSlice(r.Object, "results")
			for _, res := range results {
				m, _ := res.(map[string]any)
				if m["policy"] == policy.GetName() && m["rule"] == "require-pinned-image" && m["result"] == "fail" {
					if m["severity"] != "medium" || m["category"] != "Best Practices" {
						return fmt.Errorf("the fail result lacks the policy's severity/category annotations: %v", m)
					}
					return nil
				}
			}
			return fmt.Errorf("PolicyReport %s has fail=%d but no fail result of %s/require-pinned-image: %v", r.GetName(), fail, policy.GetName(), results)
		}
		return fmt.Errorf("no PolicyReport about Deployment %s/%s yet (%d reports in the namespace)", ns, violating.Name, len(reports.Items))
	})
}
