package e2e

import (
	"fmt"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// What an exception exempts is counted: Kyverno reports the excepted Deployment's result as skip
// and names the exception; the cluster's agent counts it, and the hub shows it in the exception's
// status (status.exempted, and the cluster's skip count in its ClusterStatusSlices) and metrics
// (policyhub_exception_exempted_results, and policyhub_exceptions_active for the policy).
func TestExceptionExemptedResultsCounted(t *testing.T) {
	inParallel(t)
	hub := startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns = "exception-counted-e2e"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	fp := enforcedLatestTag(t, "e2e-exception-counted", ns)
	ex := approvedException(t, fmt.Sprintf(`
metadata: {name: counted, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], kinds: [Deployment], names: ["legacy-*"]}
  clusters: {names: [cluster-1]}
  owner: platform
  reason: two legacy Deployments until their migration
  ticket: MIG-2
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	waitException(t, ex, "Active", exceptionState(policyhubv1.ExceptionActive))
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	for _, name := range []string{"legacy-a", "legacy-b"} {
		d := deployment(ns, "web-latest", "nginx:latest")
		d.Name = name
		admittedEventually(ctx, t, "cluster-1", d, name+" admitted")
		if err := cluster1.Create(ctx, d); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	counted := waitExceptionFor(t, ex, 3*time.Minute, "two exempted results counted", func(ex *policyhubv1.FleetPolicyException) error {
		if ex.Status.Exempted != 2 {
			return fmt.Errorf("status.exempted %d, want 2", ex.Status.Exempted)
		}
		return nil
	})
	if counted.Status.Summary.Results.Skip != 2 {
		t.Errorf("status.summary.results.skip = %d, want 2 (the cluster's count)", counted.Status.Summary.Results.Skip)
	}
	labels := map[string]string{"namespace": e2eHubNamespace, "name": ex.Name, "policy": "ClusterPolicy/" + fp.Name}
	if v, ok := hub.scrape(t, "policyhub_exception_exempted_results", labels); !ok || v != 2 {
		t.Errorf("policyhub_exception_exempted_results%v = %v (present %v), want 2", labels, v, ok)
	}
	if v, ok := hub.scrape(t, "policyhub_exceptions_active", map[string]string{"policy": "ClusterPolicy/" + fp.Name}); !ok || v != 1 {
		t.Errorf("policyhub_exceptions_active = %v (present %v), want 1", v, ok)
	}
	if v, ok := hub.scrape(t, "policyhub_exception_expiry_timestamp_seconds", labels); !ok || int64(v) != ex.Spec.ExpiresAt.Unix() {
		t.Errorf("policyhub_exception_expiry_timestamp_seconds = %v (present %v), want %d", v, ok, ex.Spec.ExpiresAt.Unix())
	}
}
