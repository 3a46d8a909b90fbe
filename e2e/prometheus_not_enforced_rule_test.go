package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// PolicyhubPolicyNotEnforced, as the chart renders it (on by default), evaluated by promtool on
// the hub's phase series: it fires for a cluster that kept NotEnforced declarations for its 15
// minutes (two hub replicas exporting the same series count once), names the cluster and the
// count, and is quiet for a cluster whose declarations were rewritten in time or that has none.
func TestPrometheusPolicyNotEnforcedRule(t *testing.T) {
	const name = "PolicyhubPolicyNotEnforced"
	if rule := alertRules(t, `prometheusRule: {enabled: true}`); !containsAlert(rule, name) {
		t.Fatalf("%s is off by default: a cluster's unprotected policies would go unnoticed", name)
	}
	rule := promtoolRule(t, name)
	if !strings.Contains(rule.Annotations["description"], "kubectl policyhub status") {
		t.Errorf("the alert does not say where to see the declarations: %v", rule.Annotations)
	}
	phase := func(cluster, phase, pod string) string {
		return fmt.Sprintf(`policyhub_cluster_declarations{cluster=%q, phase=%q, job="policyhub-hub-metrics", pod=%q}`, cluster, phase, pod)
	}
	fires := func(cluster string, n int) []promAlert {
		return []promAlert{{Labels: map[string]string{"severity": "warning", "cluster": cluster}, Annotations: map[string]string{
			"summary":     "Policies not enforced in cluster " + cluster,
			"description": strings.NewReplacer(`{{ $labels.cluster }}`, cluster, `{{ $value | printf "%.0f" }}`, fmt.Sprint(n)).Replace(rule.Annotations["description"]),
		}}}
	}
	file := map[string]any{
		"rule_files":          []string{prometheusRulesFile(t)},
		"evaluation_interval": "1m",
		"tests": []promRuleTest{
			{Interval: "1m", Input: []promSeries{
				// upgraded: 3 legacy declarations NotEnforced since Kyverno 1.20, seen by two replicas.
				{phase("upgraded", "not_enforced", "hub-a"), "3x40"},
				{phase("upgraded", "not_enforced", "hub-b"), "3x40"},
				{phase("upgraded", "synced", "hub-a"), "7x40"},
				// rewritten: its one declaration is rewritten as a CEL kind after 5 minutes.
				{phase("rewritten", "not_enforced", "hub-a"), "1 1 1 1 1 0x35"},
				// fine: synced only.
				{phase("fine", "synced", "hub-a"), "4x40"},
			}, Checks: []promCheck{
				{"10m", name, []promAlert{}},
				{"30m", name, fires("upgraded", 3)},
			}},
		},
	}
	promtoolTestRules(t, file)
}
