package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

// `kubectl policyhub sync --dry-run` plans what the hub writes for a FleetPolicy with an
// exception in force: the hub marks its NamespacedValidatingPolicy with the exceptions in force
// (kyverno#17605), and the preview, gathering the same inputs, plans that object unchanged
// rather than an update taking the mark away.
func TestCLISyncDryRunKeepsTheExceptionsInForceMark(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "cli-sync-exception-e2e", "e2e-cli-sync-exception"
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster1, ns)
	fp := createNamespacedNoLatestPolicy(t, name, ns)
	waitFleetPolicy(t, fp.Name, "in force in cluster-1", allInForce)

	approver := approverClient(t, "security@corp")
	ex := requestException(t, directClient(t, fleetOf(t).Hub.Config), fmt.Sprintf(`
metadata: {name: cli-sync-mark, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {names: [cluster-1]}
  owner: platform
  reason: the preview must plan what the hub writes
  ticket: K-45
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitException(t, ex, "Active", exceptionState(policyhubv1.ExceptionActive))
	eventually(t, time.Minute, 200*time.Millisecond, "the hub marks the policy with the exception in force", func() error {
		live := &unstructured.Unstructured{}
		live.SetAPIVersion("policies.kyverno.io/v1")
		live.SetKind("NamespacedValidatingPolicy")
		if err := cluster1.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, live); err != nil {
			return err
		}
		if live.GetAnnotations()[render.AnnotationExceptionsInForce] == "" {
			return fmt.Errorf("annotations %v", live.GetAnnotations())
		}
		return nil
	})
	waitFleetPolicy(t, fp.Name, "in force in cluster-1 with the mark", allInForce)

	report, out := syncCLIDryRunJSON(t, "--policy", name, "--cluster", "cluster-1")
	if len(report.Clusters) != 1 || len(report.Clusters[0].Declarations) != 1 {
		t.Fatalf("report: %s", out)
	}
	d := report.Clusters[0].Declarations[0]
	if d.Phase != "DryRun" || d.Actions.Unchanged != 1 || d.Actions.Updated+d.Actions.Created+d.Actions.Deleted != 0 || len(d.Changes) != 0 {
		t.Errorf("the preview plans %s %+v with changes %+v, want the marked policy unchanged: %s", d.Phase, d.Actions, d.Changes, out)
	}
}
