package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyhub/policyhub/internal/charttest"
)

// PolicyhubKyvernoUpgradeBlocked, as the chart renders it once enabled (off by default),
// evaluated by promtool on the hub's legacy series: it fires for a cluster that kept legacy
// objects for its hour (owned or not; two hub replicas exporting the same series count once),
// names the cluster and the count, and is quiet for a cluster whose objects were removed in time
// or that has none.
func TestPrometheusKyvernoUpgradeBlockedRule(t *testing.T) {
	if rule := alertRules(t, `prometheusRule: {enabled: true}`); containsAlert(rule, "PolicyhubKyvernoUpgradeBlocked") {
		t.Error("PolicyhubKyvernoUpgradeBlocked is on by default; the chart says a team enables it")
	}
	rule := promtoolRule(t, "PolicyhubKyvernoUpgradeBlocked")
	if !strings.Contains(rule.Annotations["description"], "kubectl policyhub inventory") {
		t.Errorf("the alert does not say where to see the objects: %v", rule.Annotations)
	}
	legacy := func(cluster, kind, owner, pod string) string {
		return fmt.Sprintf(`policyhub_cluster_legacy_objects{cluster=%q, kind=%q, owner=%q, job="policyhub-hub-metrics", pod=%q}`, cluster, kind, owner, pod)
	}
	const name = "PolicyhubKyvernoUpgradeBlocked"
	fires := func(cluster string, n int) []promAlert {
		return []promAlert{{Labels: map[string]string{"severity": "warning", "cluster": cluster}, Annotations: map[string]string{
			"summary":     "Cluster " + cluster + " would fail Kyverno 1.20 upgrade; legacy objects present",
			"description": strings.NewReplacer(`{{ $labels.cluster }}`, cluster, `{{ $value | printf "%.0f" }}`, fmt.Sprint(n)).Replace(rule.Annotations["description"]),
		}}}
	}
	file := map[string]any{
		"rule_files":          []string{prometheusRulesFile(t)},
		"evaluation_interval": "5m",
		"tests": []promRuleTest{
			{Interval: "5m", Input: []promSeries{
				// blocked: 200 unowned ClusterPolicies and one policyhub exception, seen by two replicas.
				{legacy("blocked", "ClusterPolicy", "other", "hub-a"), "200x20"},
				{legacy("blocked", "ClusterPolicy", "other", "hub-b"), "200x20"},
				{legacy("blocked", "PolicyException", "policyhub", "hub-a"), "1x20"},
				// cleaned: its one object is deleted after 30 minutes, within the hour.
				{legacy("cleaned", "Policy", "other", "hub-a"), "1 1 1 1 1 1 0x14"},
				// clean: zeros only.
				{legacy("clean", "ClusterPolicy", "other", "hub-a"), "0x20"},
			}, Checks: []promCheck{
				{"30m", name, []promAlert{}},
				{"70m", name, fires("blocked", 201)},
			}},
		},
	}
	promtoolTestRules(t, file)
}

func containsAlert(rules []charttest.AlertRule, name string) bool {
	for _, r := range rules {
		if r.Alert == name {
			return true
		}
	}
	return false
}
