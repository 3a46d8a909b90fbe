package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Where Kyverno would ignore an exception, it is Unsupported with the reason, not written and not
// counted in force: cluster-2 is labelled as reading exceptions from a namespace its Kyverno
// (started with --exceptionNamespace=policyhub-system) does not read, and the real Kyverno's
// exception webhook says so to the hub's dry-run; cluster-1 holds the exception.
func TestExceptionUnsupportedWhereKyvernoIgnoresIt(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, elsewhere = "exception-unsupported-e2e", "exception-elsewhere"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster("cluster-2").Config), elsewhere)
	labels := maps.Clone(fleetOf(t).Cluster("cluster-2").Labels)
	labels[policyhubv1.LabelExceptionNamespace] = elsewhere
	if err := fleetOf(t).SetClusterLabels(ctx, "cluster-2", labels); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		delete(labels, policyhubv1.LabelExceptionNamespace)
		if err := fleetOf(t).SetClusterLabels(context.Background(), "cluster-2", labels); err != nil {
			t.Errorf("restore cluster-2's labels: %v", err)
		}
	})
	fp := enforcedLatestTag(t, "e2e-exception-unsupported", ns)
	ex := approvedException(t, fmt.Sprintf(`
metadata: {name: unsupported, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {clusterSelector: {}}
  owner: platform
  reason: checking where Kyverno reads exceptions
  ticket: SEC-404
  expiresAt: %s`, e2eHubNamespace, fp.Name, ns, expiresIn(time.Hour)))
	var cluster2 policyhubv1.ClusterStatus
	live := waitException(t, ex, "in force in cluster-1, Unsupported in cluster-2", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		clusters, err := exceptionClusters(ctx, t, ex)
		if err != nil {
			return err
		}
		phases := map[string]policyhubv1.ClusterPhase{}
		for name, c := range clusters {
			phases[name] = c.Phase
		}
		cluster2 = clusters["cluster-2"]
		if phases["cluster-1"] != policyhubv1.ClusterPhaseSynced || phases["cluster-2"] != policyhubv1.ClusterPhaseUnsupported || ex.Status.InForce != 1 {
			return fmt.Errorf("phases %v, inForce %d", phases, ex.Status.InForce)
		}
		return nil
	})
	for _, want := range []string{"cluster cluster-2 would ignore this exception", "another namespace than " + elsewhere, "--exceptionNamespace", "nothing was sent"} {
		if !strings.Contains(cluster2.Message, want) {
			t.Errorf("cluster-2's message %q lacks %q", cluster2.Message, want)
		}
	}
	if ready := findExceptionCondition(live, policyhubv1.ConditionReady); ready == nil || ready.Status != "False" || !strings.Contains(ready.Message, "cluster-2: Unsupported") {
		t.Errorf("Ready = %+v, want False naming cluster-2 Unsupported", ready)
	}
	name := policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)
	for _, where := range []string{elsewhere, policyhubv1.DefaultExceptionNamespace} {
		if kyvernoExceptionsIn(ctx, t, "cluster-2", "kyverno.io/v2", where)[name] != nil {
			t.Errorf("cluster-2 holds the exception in %s", where)
		}
	}
	if kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name] == nil {
		t.Errorf("cluster-1 lacks the exception")
	}
}

func findExceptionCondition(ex *policyhubv1.FleetPolicyException, kind string) *metav1.Condition {
	for i := range ex.Status.Conditions {
		if ex.Status.Conditions[i].Type == kind {
			return &ex.Status.Conditions[i]
		}
	}
	return nil
}
