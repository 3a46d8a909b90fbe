package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster admin cannot widen an exception the hub ships: a namespace added to its match is
// drift, and the hub restores the exception within seconds.
func TestExceptionWidenedInAClusterIsRestored(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-drift-e2e"
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-1").Config), ns)
	fp := enforcedLatestTag(t, "e2e-exception-drift", ns)
	ex := approvedException(t, fmt.Sprintf(`
metadata: {name: drift, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {names: [cluster-1]}
  owner: platform
  reason: one Deployment only
  ticket: SEC-5
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	waitException(t, ex, "in force in cluster-1", func(ex *policyhubv1.FleetPolicyException) error {
		if ex.Status.InForce != 1 {
			return fmt.Errorf("inForce %d", ex.Status.InForce)
		}
		return nil
	})
	name := policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	live := kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name]
	if live == nil {
		t.Fatal("no exception in cluster-1")
	}
	// The cluster admin's edit: every name, in every namespace.
	widened := live.DeepCopy()
	if err := unstructured.SetNestedSlice(widened.Object, []any{map[string]any{"resources": map[string]any{"names": []any{"*"}}}}, "spec", "match", "any"); err != nil {
		t.Fatal(err)
	}
	if err := cluster1.Update(ctx, widened); err != nil {
		t.Fatalf("the cluster admin's update: %v", err)
	}
	widenedAt := time.Now()
	eventually(t, 30*time.Second, 200*time.Millisecond, "the exception restored", func() error {
		got := kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name]
		if got == nil {
			return fmt.Errorf("gone")
		}
		match, _, _ := unstructured.NestedSlice(got.Object, "spec", "match", "any")
		if fmt.Sprint(match) != fmt.Sprint(mustNestedSlice(t, live, "spec", "match", "any")) {
			return fmt.Errorf("match is %v", match)
		}
		return nil
	})
	t.Logf("restored %s after the cluster admin widened it", time.Since(widenedAt).Round(time.Millisecond))
}

func mustNestedSlice(t *testing.T, obj *unstructured.Unstructured, fields ...string) []any {
	t.Helper()
	s, found, err := unstructured.NestedSlice(obj.Object, fields...)
	if err != nil || !found {
		t.Fatalf("%v: found %v, %v", fields, found, err)
	}
	return s
}
