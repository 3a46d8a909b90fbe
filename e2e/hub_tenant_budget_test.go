package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
)

// A tenant past its budget in a cluster stops nobody but itself there. Its declarations are
// counted before anything is written, oldest first: the newest past the budget are refused in
// that cluster (Failed there, the declaration Stalled, saying the tenant, the count and the
// budget) and none of their objects is written, while the older ones are synced. An unrelated
// FleetPolicy's change still reaches the cluster, and the tenant's approved exception is removed
// at its expiry (removal waits on no budget), which frees its place for the oldest refused one.
// The hub's cache bound is small enough that, without the budget, the tenant's objects would
// pass it.
func TestTenantPastItsBudgetStopsNobodyElse(t *testing.T) {
	const budget, cacheBound = 3, 5
	startHub(t, time.Hour, func(o *controllers.HubOptions) { o.TenantBudget, o.MaxOwnedObjects = budget, cacheBound })
	ctx := testContext(t)
	const tenant = "team-budget"
	hub := directClient(t, fleetOf(t).Hub.Config)
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, hub, tenant)
	createNamespace(ctx, t, c1, tenant)
	grantTenant(ctx, t, tenant)
	fp := enforcedLatestTag(t, "e2e-budget-fleet", tenant) // the platform's: one object in each cluster

	// The tenant's oldest declaration: an approved exception, one object in each cluster.
	expiresAt := time.Now().Add(30 * time.Second).Truncate(time.Second)
	ex := requestException(t, tenantClient(t, tenant, "dev@team-budget"), fmt.Sprintf(`
metadata: {name: grace, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {names: [web-latest]}
  clusters: {clusterSelector: {}}
  owner: team-budget
  reason: a short grace
  ticket: B-1
  expiresAt: %s`, tenant, fp.Name, expiresAt.UTC().Format(time.RFC3339)))
	if err := decide(ctx, t, approverClient(t, "security@corp"), ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitException(t, ex, "Active in both clusters", activeIn(2))
	exception := policyhubv1.ExceptionObjectName(tenant, ex.Name)
	// Creation times count whole seconds, and a tie goes by kind and name (an ApplicationPolicy
	// before a FleetPolicyException): the ApplicationPolicies are made in a later second than the
	// exception, so that it is the tenant's oldest declaration however fast this runs.
	eventually(t, 3*time.Second, 50*time.Millisecond, "a second later than the exception's creation", func() error {
		if now := time.Now(); now.Before(ex.CreationTimestamp.Add(time.Second)) {
			return fmt.Errorf("%s is within the second of %s", now.Format(time.RFC3339Nano), ex.CreationTimestamp.Format(time.RFC3339))
		}
		return nil
	})

	// Then three ApplicationPolicies in cluster-1, one after the other: 2 objects (the tenant
	// holds 3, its budget), then 1 (4) and 1 (5).
	application := func(name, scope string) {
		createApplicationPolicy(t, fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: ApplicationPolicy
metadata: {name: %s, namespace: %s}
spec:
  application: shop
  mode: Audit
  scope: %s
  placement: {clusters: [cluster-1]}
  rules:
  - name: need-team
    validate: {message: "shop needs a team label", pattern: {metadata: {labels: {team: "?*"}}}}
`, name, tenant, scope))
	}
	refused := func(holding int) func(*appView) error {
		want := fmt.Sprintf("tenant %s would hold %d objects in cluster-1, over its budget of %d (--max-objects-per-tenant-per-cluster)", tenant, holding, budget)
		return func(ap *appView) error {
			if len(ap.Clusters) != 1 || ap.Clusters[0].Phase != policyhubv1.ClusterPhaseFailed || !strings.HasPrefix(ap.Clusters[0].Message, want) {
				return fmt.Errorf("clusters %+v, want cluster-1 refused: %q", ap.Clusters, want)
			}
			stalled := apimeta.FindStatusCondition(ap.Status.Conditions, policyhubv1.ConditionStalled)
			if stalled == nil || stalled.Reason != controllers.ReasonOverBudget || !strings.HasPrefix(stalled.Message, want) {
				return fmt.Errorf("Stalled = %+v, want %s naming the budget", stalled, controllers.ReasonOverBudget)
			}
			if reconciling := apimeta.FindStatusCondition(ap.Status.Conditions, policyhubv1.ConditionReconciling); reconciling != nil {
				return fmt.Errorf("Reconciling = %+v: a refusal is not retried", reconciling)
			}
			return nil
		}
	}
	synced := apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": policyhubv1.ClusterPhaseSynced})
	application("budget-1", "{resources: [{kind: Deployment, name: web}, {kind: Deployment, name: api}]}")
	waitApplicationPolicy(t, tenant, "budget-1", 60*time.Second, "budget-1 synced", synced)
	application("budget-2", "{resources: [{kind: Deployment, name: db}]}")
	waitApplicationPolicy(t, tenant, "budget-2", 60*time.Second, "budget-2 refused", refused(4))
	application("budget-3", "{kinds: [Deployment]}")
	waitApplicationPolicy(t, tenant, "budget-3", 60*time.Second, "budget-3 refused", refused(5))
	held := func() []string { return ownedPolicies(t, "cluster-1", "kyverno.io/v1", "Policy", tenant) }
	if got := held(); !slices.Equal(got, []string{"budget-1-deployment-api", "budget-1-deployment-web"}) {
		t.Errorf("cluster-1 holds the tenant's Policies %v, want budget-1's two only", got)
	}

	// An unrelated FleetPolicy's change reaches the cluster.
	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Template.Metadata.Annotations = map[string]string{"policies.kyverno.io/severity": "high"}
	})
	eventually(t, 30*time.Second, 200*time.Millisecond, "the FleetPolicy's change in cluster-1", func() error {
		live := &unstructured.Unstructured{}
		live.SetAPIVersion("kyverno.io/v1")
		live.SetKind("ClusterPolicy")
		if err := c1.Get(ctx, client.ObjectKey{Name: fp.Name}, live); err != nil {
			return err
		}
		if got := live.GetAnnotations()["policies.kyverno.io/severity"]; got != "high" {
			return fmt.Errorf("severity %q", got)
		}
		return nil
	})
	if kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[exception] == nil {
		t.Fatalf("cluster-1 lacks the exception before its end")
	}

	// At the end the exception is removed from both clusters, and its place goes to budget-2.
	t.Logf("the exception ends in %s", time.Until(expiresAt).Round(time.Second))
	eventually(t, time.Until(expiresAt)+30*time.Second, 500*time.Millisecond, "the exception gone from both clusters", func() error {
		for _, c := range []string{"cluster-1", "cluster-2"} {
			if kyvernoExceptions(ctx, t, c, "kyverno.io/v2")[exception] != nil {
				return fmt.Errorf("still in %s", c)
			}
		}
		return nil
	})
	waitApplicationPolicy(t, tenant, "budget-2", 60*time.Second, "budget-2 synced once the exception ended", synced)
	waitApplicationPolicy(t, tenant, "budget-3", 60*time.Second, "budget-3 still refused", refused(4))
	if got := held(); !slices.Equal(got, []string{"budget-1-deployment-api", "budget-1-deployment-web", "budget-2-deployment-db"}) {
		t.Errorf("cluster-1 holds the tenant's Policies %v, want budget-1's and budget-2's", got)
	}
}

// activeIn passes once the exception is Active and in force in n clusters.
func activeIn(n int32) func(*policyhubv1.FleetPolicyException) error {
	return func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != n {
			return fmt.Errorf("inForce %d, want %d", ex.Status.InForce, n)
		}
		return nil
	}
}
