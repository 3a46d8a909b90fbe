package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// teamApplicationPolicy requires a team label on app shop's Deployments in namespace ns.
func teamApplicationPolicy(name, ns, mode string, clusters ...string) string {
	return fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: ApplicationPolicy
metadata: {name: %s, namespace: %s}
spec:
  application: shop
  mode: %s
  scope: {kinds: [Deployment]}
  placement: {clusters: [%s]}
  rules:
  - name: need-team
    validate: {message: "shop Deployments need a team label", pattern: {metadata: {labels: {team: "?*"}}}}
`, name, ns, mode, strings.Join(clusters, ", "))
}

// Audit: the ApplicationPolicy's status shows shop's violations in cluster 1 — per policy, and
// the violating resource among the top violations — and nothing of another application's.
func TestApplicationPolicyAuditResults(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns = "ap-audit"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, directClient(t, fleetOf(t).Hub.Config), ns)
	grantTenant(ctx, t, ns)
	createApplicationPolicy(t, teamApplicationPolicy("shop-team", ns, "Audit", "cluster-1"))
	waitApplicationPolicy(t, ns, "shop-team", 90*time.Second, "synced", apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	blog := shopDeployment(ns, "blog", "")
	blog.Labels["app.oam.dev/name"] = "blog"
	for _, d := range []*appsv1.Deployment{shopDeployment(ns, "web", ""), blog} {
		if err := c1.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	ap := waitApplicationPolicy(t, ns, "shop-team", 3*time.Minute, "shop's violation in cluster-1", func(ap *appView) error {
		for _, p := range ap.Status.Policies {
			if p.Cluster == "cluster-1" && p.Policy == "shop-team" && p.Results.Fail >= 1 {
				return nil
			}
		}
		return fmt.Errorf("policies %+v", ap.Status.Policies)
	})
	seenWeb := false
	for _, v := range ap.Status.TopViolations {
		if v.Resource.Name == "blog" {
			t.Errorf("another application's Deployment among the violations: %+v", v)
		}
		seenWeb = seenWeb || (v.Resource.Name == "web" && v.Cluster == "cluster-1" && v.Rule == "need-team")
	}
	if !seenWeb {
		t.Errorf("web is not among the top violations: %+v", ap.Status.TopViolations)
	}
	if s := ap.Clusters[0]; s.Results == nil || s.Results.Fail != ap.Status.Policies[0].Results.Fail {
		t.Errorf("cluster-1's results are not the application's: %+v", s)
	}
}

// Enforce: Kyverno refuses a non-compliant shop Deployment in cluster 2 with its message, and the
// refusal — counted, with that message — shows in the ApplicationPolicy's status.
func TestApplicationPolicyEnforceBlocked(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns = "ap-enforce"
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	createNamespace(ctx, t, directClient(t, fleetOf(t).Hub.Config), ns)
	grantTenant(ctx, t, ns)
	createApplicationPolicy(t, teamApplicationPolicy("shop-team", ns, "Enforce", "cluster-2"))
	waitApplicationPolicy(t, ns, "shop-team", 90*time.Second, "synced", apPhases(map[string]policyhubv1.ClusterPhase{"cluster-2": "Synced"}))

	waitRefused(t, "cluster-2", ns, "shop Deployments need a team label")
	waitApplicationPolicy(t, ns, "shop-team", 2*time.Minute, "the refusal in the status, with Kyverno's message", func(ap *appView) error {
		for _, p := range ap.Status.Policies {
			if p.Cluster == "cluster-2" && p.Blocked >= 1 && p.LastBlocked != nil && strings.Contains(p.LastBlocked.Message, "shop Deployments need a team label") {
				return nil
			}
		}
		return fmt.Errorf("policies %+v", ap.Status.Policies)
	})
}
