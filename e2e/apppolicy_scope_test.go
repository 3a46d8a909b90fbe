package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Scope semantics, seen through Kyverno's own admission in cluster 1: a `kinds` rule affects every
// Deployment of app shop; a `resources` rule for web affects only web; another application's
// Deployment in the same namespace is matched by neither.
func TestApplicationPolicyScope(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "ap-scope"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	// Both policies are created in the hub namespace of the same name as the cluster's.
	createNamespace(ctx, t, directClient(t, fleetOf(t).Hub.Config), ns)
	grantTenant(ctx, t, ns)
	createApplicationPolicy(t, fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: ApplicationPolicy
metadata: {name: shop-team, namespace: %s}
spec:
  application: shop
  mode: Enforce
  scope: {kinds: [Deployment]}
  placement: {clusters: [cluster-1]}
  rules:
  - name: need-team
    validate: {message: "shop Deployments need a team label", pattern: {metadata: {labels: {team: "?*"}}}}
`, ns))
	createApplicationPolicy(t, fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: ApplicationPolicy
metadata: {name: shop-web-tier, namespace: %s}
spec:
  application: shop
  mode: Enforce
  scope: {resources: [{kind: Deployment, name: web}]}
  placement: {clusters: [cluster-1]}
  rules:
  - name: need-tier
    validate: {message: "web needs a tier label", pattern: {metadata: {labels: {tier: "?*"}}}}
`, ns))
	for _, name := range []string{"shop-team", "shop-web-tier"} {
		waitApplicationPolicy(t, ns, name, 90*time.Second, name+" synced", apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	}
	if got := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "Policy", ns); fmt.Sprint(got) != "[shop-team shop-web-tier-deployment-web]" {
		t.Fatalf("generated Policies in cluster-1: %v", got)
	}

	// Server-side dry-run creations go through Kyverno's admission and persist nothing.
	admit := func(app, name string, labels map[string]string) error {
		d := shopDeployment(ns, name, "")
		d.Labels["app.oam.dev/name"] = app
		for k, v := range labels {
			d.Labels[k] = v
		}
		return c1.Create(ctx, d, client.DryRunAll)
	}
	for _, tc := range []struct {
		what        string
		app, name   string
		labels      map[string]string
		deniedBy    string // a message the denial must contain; empty: admitted
		notDeniedBy string
	}{
		{"web with a team but no tier: the resources rule applies to web", "shop", "web", map[string]string{"team": "a"}, "web needs a tier label", "shop Deployments need a team label"},
		{"api with a team but no tier: the resources rule is web's only", "shop", "api", map[string]string{"team": "a"}, "", ""},
		{"api without a team: the kinds rule applies to every shop Deployment", "shop", "api", nil, "shop Deployments need a team label", "web needs a tier label"},
		{"web without team or tier: both rules apply together", "shop", "web", nil, "shop Deployments need a team label", ""},
		{"blog's Deployment named web, no labels: another application is not matched", "blog", "web", nil, "", ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			eventually(t, 60*time.Second, time.Second, "Kyverno's verdict", func() error {
				err := admit(tc.app, tc.name, tc.labels)
				switch {
				case tc.deniedBy == "" && err != nil:
					return fmt.Errorf("denied: %v", err)
				case tc.deniedBy != "" && err == nil:
					return fmt.Errorf("admitted")
				case tc.deniedBy != "" && !strings.Contains(err.Error(), tc.deniedBy):
					return fmt.Errorf("denied without %q: %v", tc.deniedBy, err)
				case tc.notDeniedBy != "" && err != nil && strings.Contains(err.Error(), tc.notDeniedBy):
					return fmt.Errorf("denied by %q too: %v", tc.notDeniedBy, err)
				}
				return nil
			})
		})
	}
}
