package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception from a PolicySet member follows the member across the set's versions while the
// member keeps its name: a new version that changes another member leaves it in force, untouched
// in the clusters; a version without the member prunes it everywhere (TargetMissing).
func TestExceptionFollowsPolicySetMember(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, set = "exception-pset-e2e", "e2e-exception-pset"
	clusters := []string{"cluster-1", "cluster-2"}
	for _, c := range clusters {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	latest := latestTagPolicy(t, "pset-exc-latest", ns, "Enforce")
	members := func(otherMessage string, withLatest bool) string {
		other := fmt.Sprintf(`
    - apiVersion: kyverno.io/v1
      kind: ClusterPolicy
      metadata: {name: pset-exc-other}
      spec: %s`, indentedSpec(otherMessage))
		if !withLatest {
			return other
		}
		return other + "\n    - " + string(marshalJSON(latest.Object))
	}
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  source:
    inline:%s
`, set, members("v1", true)))
	v1 := waitPolicySet(t, set, "v1 in force", func(s *setView) error {
		if s.Status.Source == nil {
			return fmt.Errorf("no version yet")
		}
		return setInForce(s.Status.Source.Digest, clusters...)(s)
	})
	deployment := deployment(ns, "web-latest", "nginx:latest")
	deniedEventually(ctx, t, "cluster-1", deployment, "the member denies nginx:latest")

	approver := approverClient(t, "security@corp")
	ex := requestException(t, directClient(t, fleetOf(t).Hub.Config), fmt.Sprintf(`
metadata: {name: pset-member, namespace: %s}
spec:
  target: {kind: PolicySet, name: %s, member: {kind: ClusterPolicy, name: pset-exc-latest}}
  resources: {namespaces: [%s], names: [web-latest]}
  clusters: {clusterSelector: {}}
  owner: platform
  reason: following a member
  ticket: SET-1
  expiresAt: %s`, e2eHubNamespace, set, ns, expiresIn(time.Hour)))
	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	inBoth := func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != 2 || ex.Status.Policy != "ClusterPolicy/pset-exc-latest" {
			return fmt.Errorf("inForce %d, policy %q", ex.Status.InForce, ex.Status.Policy)
		}
		return nil
	}
	waitException(t, ex, "in force in both clusters", inBoth)
	admittedEventually(ctx, t, "cluster-1", deployment, "the excepted Deployment admitted")
	name := policyhubv1.ExceptionObjectName(e2eHubNamespace, ex.Name)
	before := kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name]
	if before == nil {
		t.Fatal("no exception in cluster-1")
	}

	// v2 changes the other member only: the exception stays, unchanged in the clusters.
	updatePolicySet(t, set, func(ps *policyhubv1.PolicySet) {
		ps.Spec.Source.Inline = inlineOf(t, members("v2", true))
	})
	waitPolicySet(t, set, "v2 in force", func(s *setView) error {
		if s.Status.Source == nil || s.Status.Source.Digest == v1.Status.Source.Digest {
			return fmt.Errorf("still at v1")
		}
		return setInForce(s.Status.Source.Digest, clusters...)(s)
	})
	waitException(t, ex, "still in force in both clusters", inBoth)
	if after := kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name]; after == nil || after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the exception was rewritten or removed by a version that kept its member")
	}

	// v3 drops the member: the exception is pruned everywhere.
	updatePolicySet(t, set, func(ps *policyhubv1.PolicySet) {
		ps.Spec.Source.Inline = inlineOf(t, members("v3", false))
	})
	waitException(t, ex, "pruned, its member gone", func(ex *policyhubv1.FleetPolicyException) error {
		ready := meta.FindStatusCondition(ex.Status.Conditions, policyhubv1.ConditionReady)
		if ready == nil || ready.Reason != "TargetMissing" || ex.Status.InForce != 0 {
			return fmt.Errorf("Ready %+v, inForce %d", ready, ex.Status.InForce)
		}
		return nil
	})
	for _, c := range clusters {
		if kyvernoExceptions(ctx, t, c, "kyverno.io/v2")[name] != nil {
			t.Errorf("%s still holds the exception of a member the set dropped", c)
		}
	}
}

// inlineOf reads a YAML list of policy templates (as in spec.source.inline).
func inlineOf(t *testing.T, list string) []policyhubv1.PolicyTemplate {
	t.Helper()
	var src struct {
		Inline []policyhubv1.PolicyTemplate `json:"inline"`
	}
	if err := yaml.Unmarshal([]byte("inline:"+list), &src); err != nil {
		t.Fatal(err)
	}
	return src.Inline
}
