package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An exception without an owner, a reason or a ticket, one that never ends within the hub's
// maximum lifetime or ended before it was asked for, one that narrows nothing or chooses no
// cluster, is refused when it is created, naming the field: the real hub apiserver with the CRD's
// schema and the admission policies. Nothing is stored.
func TestExceptionRefusedAtAdmission(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const ns = "exception-refused-e2e"
	createNamespace(ctx, t, hub, ns)
	valid := map[string]string{
		"target":    "{kind: FleetPolicy, name: disallow-latest}",
		"resources": "{namespaces: [shop], names: [web]}",
		"clusters":  "{names: [cluster-1]}",
		"owner":     "team-shop",
		"reason":    "vendor chart",
		"ticket":    "SEC-9",
		"expiresAt": expiresIn(24 * time.Hour),
	}
	for _, c := range []struct {
		name   string
		change map[string]string // "" removes the field
		want   []string
	}{
		{"no owner", map[string]string{"owner": ""}, []string{"spec.owner", "at least 1 chars long"}},
		{"a blank reason", map[string]string{"reason": `"   "`}, []string{"spec.reason", `should match '\S'`}},
		{"no ticket", map[string]string{"ticket": ""}, []string{"spec.ticket", "at least 1 chars long"}},
		{"no end date", map[string]string{"expiresAt": ""}, []string{"spec.expiresAt", "Required value"}},
		{"beyond the maximum lifetime", map[string]string{"expiresAt": expiresIn(2161 * time.Hour)},
			[]string{"spec.expiresAt must be at most 2160h after the exception is created"}},
		{"ended before it was asked for", map[string]string{"expiresAt": expiresIn(-time.Minute)},
			[]string{"spec.expiresAt must be after the exception is created"}},
		{"narrowing nothing", map[string]string{"resources": "{kinds: [Deployment]}"}, []string{"spec.resources must narrow the exception"}},
		{"no cluster", map[string]string{"clusters": "{}"}, []string{"spec.clusters: name clusters, or give a clusterSelector"}},
		{"a PolicySet target without its member", map[string]string{"target": "{kind: PolicySet, name: baseline}"}, []string{"spec.target.member"}},
		{"a match condition named like the hub's", map[string]string{"resources": "{namespaces: [shop], matchConditions: [{name: policyhub-names, expression: 'true'}]}"},
			[]string{"names starting with policyhub- are the hub's own"}},
		{"an empty resource selector", map[string]string{"resources": "{namespaces: [shop], selector: {}}"}, []string{"spec.resources.selector is empty"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var spec strings.Builder
			for _, field := range []string{"target", "resources", "clusters", "owner", "reason", "ticket", "expiresAt"} {
				value, changed := c.change[field]
				if !changed {
					value = valid[field]
				}
				if value != "" {
					fmt.Fprintf(&spec, "  %s: %s\n", field, value)
				}
			}
			ex := &policyhubv1.FleetPolicyException{}
			manifest := fmt.Sprintf("metadata: {name: refused, namespace: %s}\nspec:\n%s", ns, spec.String())
			if err := yaml.Unmarshal([]byte(manifest), ex); err != nil {
				t.Fatal(err)
			}
			err := hub.Create(ctx, ex)
			if err == nil {
				_ = hub.Delete(ctx, ex)
				t.Fatalf("admitted:\n%s", manifest)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q lacks %q", err, w)
				}
			}
			if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), &policyhubv1.FleetPolicyException{}); err == nil {
				t.Errorf("the refused exception is stored")
			}
		})
	}
	// The valid one is admitted (the cases above fail for their own reason only).
	ex := &policyhubv1.FleetPolicyException{}
	var spec strings.Builder
	for _, field := range []string{"target", "resources", "clusters", "owner", "reason", "ticket", "expiresAt"} {
		fmt.Fprintf(&spec, "  %s: %s\n", field, valid[field])
	}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf("metadata: {name: admitted, namespace: %s}\nspec:\n%s", ns, spec.String())), ex); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, ex, client.DryRunAll); err != nil {
		t.Fatalf("the valid exception was refused: %v", err)
	}
}
