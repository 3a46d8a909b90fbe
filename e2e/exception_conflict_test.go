package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A PolicyException of the cluster's own under the name the hub would give an exception is never
// touched: the exception is a Conflict in that cluster (the cluster's object keeps its content and
// resourceVersion) and in force in the other.
func TestExceptionConflictLeavesTheClustersOwn(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "exception-conflict-e2e"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	fp := enforcedLatestTag(t, "e2e-exception-conflict", ns)
	const name = "conflicting"
	local := object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: %s, namespace: %s}
spec:
  exceptions: [{policyName: %s, ruleNames: ["*"]}]
  match: {any: [{resources: {namespaces: [%s], names: [only-this-one]}}]}`,
		policyhubv1.ExceptionObjectName(e2eHubNamespace, name), policyhubv1.DefaultExceptionNamespace, fp.Name, ns))
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	if err := cluster1.Create(ctx, local); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster1.Delete(context.Background(), local) })

	ex := approvedException(t, fmt.Sprintf(`
metadata: {name: %s, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {clusterSelector: {}}
  owner: platform
  reason: a name the cluster already uses
  ticket: SEC-409
  expiresAt: %s`, name, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	var message string
	waitException(t, ex, "Conflict in cluster-1, in force in cluster-2", func(ex *policyhubv1.FleetPolicyException) error {
		clusters, err := exceptionClusters(ctx, t, ex)
		if err != nil {
			return err
		}
		phases := map[string]policyhubv1.ClusterPhase{}
		for name, c := range clusters {
			phases[name] = c.Phase
		}
		message = clusters["cluster-1"].Message
		if phases["cluster-1"] != policyhubv1.ClusterPhaseConflict || phases["cluster-2"] != policyhubv1.ClusterPhaseSynced || ex.Status.InForce != 1 {
			return fmt.Errorf("phases %v, inForce %d", phases, ex.Status.InForce)
		}
		return nil
	})
	if !strings.Contains(message, "not managed by policyhub") {
		t.Errorf("cluster-1's message %q does not say the object is not policyhub's", message)
	}
	after := local.DeepCopy()
	if err := cluster1.Get(ctx, client.ObjectKeyFromObject(local), after); err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != local.GetResourceVersion() || len(after.GetLabels()) != 0 {
		t.Errorf("the cluster's own PolicyException was changed: resourceVersion %s → %s, labels %v", local.GetResourceVersion(), after.GetResourceVersion(), after.GetLabels())
	}
}
