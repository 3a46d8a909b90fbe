package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The hub ends an exception at spec.expiresAt, whatever Kyverno does: an approved exception
// ending a minute after it was asked for is gone from every cluster within 60 s of its end, its
// state is Expired; Kyverno denies the workload again, and the background report, which showed
// the existing workload skipped by the exception, shows it failing again.
func TestExceptionRemovedAtExpiry(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-expiry-e2e"
	clusters := []string{"cluster-1", "cluster-2"}
	for _, c := range clusters {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	fp := enforcedLatestTag(t, "e2e-exception-expiry", ns)
	approver := approverClient(t, "security@corp")
	hub := directClient(t, fleetOf(t).Hub.Config)
	expiresAt := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	ex := requestException(t, hub, fmt.Sprintf(`
metadata: {name: expiring, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s, rules: [require-pinned-image]}
  resources: {namespaces: [%s], kinds: [Deployment], names: [web-latest, web-existing]}
  clusters: {clusterSelector: {}}
  owner: platform
  reason: two minutes of grace
  ticket: SEC-120
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresAt.UTC().Format(time.RFC3339)))
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
	latest := deployment(ns, "web-latest", "nginx:latest")
	admittedEventually(ctx, t, "cluster-1", latest, "the excepted Deployment admitted in cluster-1")
	// A Deployment exists while excepted, so the background scan reports it.
	existing := deployment(ns, "web-latest", "nginx:latest")
	existing.Name = "web-existing"
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	if err := cluster1.Create(ctx, existing); err != nil {
		t.Fatalf("create the excepted Deployment: %v", err)
	}
	name := policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)
	eventually(t, time.Until(expiresAt), 2*time.Second, "the background report shows the Deployment skipped by the exception", func() error {
		return reportResult(t, "cluster-1", ns, existing.Name, fp.Name, "skip", name)
	})

	// At the end: gone from every cluster within 60 s, Expired.
	eventually(t, time.Until(expiresAt)+60*time.Second, 500*time.Millisecond, "the exception gone from both clusters", func() error {
		for _, c := range clusters {
			if got := kyvernoExceptions(ctx, t, c, "kyverno.io/v2")[name]; got != nil {
				return fmt.Errorf("still in %s", c)
			}
		}
		return nil
	})
	if late := time.Since(expiresAt); late > 60*time.Second {
		t.Errorf("removed %s after the end", late)
	} else {
		t.Logf("removed from both clusters %s after spec.expiresAt", late.Round(time.Millisecond))
	}
	waitException(t, ex, "Expired", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionExpired)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != 0 {
			return fmt.Errorf("inForce %d, want 0", ex.Status.InForce)
		}
		return nil
	})
	assertKyvernoDenial(t, "after the end", deniedEventually(ctx, t, "cluster-1", latest, "denied again in cluster-1"), ns, fp.Name)
	eventually(t, 3*time.Minute, 2*time.Second, "the background report shows the existing Deployment failing again", func() error {
		return reportResult(t, "cluster-1", ns, existing.Name, fp.Name, "fail", "")
	})
}

// reportResult finds, in the cluster's PolicyReports of namespace, the result of policy for the
// Deployment named resource, and checks it is result (and, for skip, carries the exception's
// name in its properties, as Kyverno marks exempted results).
func reportResult(t *testing.T, cluster, namespace, resource, policy, result, exception string) error {
	t.Helper()
	ctx := testContext(t)
	reports := &unstructured.UnstructuredList{}
	reports.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReportList"})
	if err := directClient(t, fleetOf(t).Cluster(cluster).Config).List(ctx, reports, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, r := range reports.Items {
		kind, _, _ := unstructured.NestedString(r.Object, "scope", "kind")
		name, _, _ := unstructured.NestedString(r.Object, "scope", "name")
		if kind != "Deployment" || name != resource {
			continue
		}
		results, _, _ := unstructured.NestedSlice(r.Object, "results")
		for _, res := range results {
			m, _ := res.(map[string]any)
			if m["policy"] != policy {
				continue
			}
			if m["result"] != result {
				return fmt.Errorf("the result of %s for %s is %v, want %s (%v)", policy, resource, m["result"], result, m)
			}
			if exception != "" {
				props, _ := m["properties"].(map[string]any)
				if props["exceptions"] != exception {
					return fmt.Errorf("the %s result names exceptions %v, want %s", result, props["exceptions"], exception)
				}
			}
			return nil
		}
		return fmt.Errorf("PolicyReport %s has no result of %s: %v", r.GetName(), policy, results)
	}
	return fmt.Errorf("no PolicyReport about Deployment %s/%s yet", namespace, resource)
}
