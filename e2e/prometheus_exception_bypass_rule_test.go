package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// PolicyhubKyvernoExceptionBypass, on by default, evaluated by promtool on the hub's
// policyhub_kyverno_info: it fires for a cluster on Kyverno 1.19.0 (kyverno#17367: exceptions
// outside --exceptionNamespace honoured), once however many hub replicas export the series, and
// is quiet for 1.19.1, 1.19.10, 1.16 and an unknown version.
func TestPrometheusKyvernoExceptionBypassRule(t *testing.T) {
	if rule := alertRules(t, `prometheusRule: {enabled: true}`); !containsAlert(rule, "PolicyhubKyvernoExceptionBypass") {
		t.Error("PolicyhubKyvernoExceptionBypass is not on by default")
	}
	rule := promtoolRule(t, "PolicyhubKyvernoExceptionBypass")
	if !strings.Contains(rule.Annotations["description"], "kyverno#17367") {
		t.Errorf("the alert does not name the Kyverno issue: %v", rule.Annotations)
	}
	info := func(cluster, version, pod string) string {
		return fmt.Sprintf(`policyhub_kyverno_info{cluster=%q, version=%q, enforces_legacy="yes", job="policyhub-hub-metrics", pod=%q}`, cluster, version, pod)
	}
	const name = "PolicyhubKyvernoExceptionBypass"
	replace := func(s, cluster, version string) string {
		return strings.NewReplacer(`{{ $labels.cluster }}`, cluster, `{{ $labels.version }}`, version).Replace(s)
	}
	fires := func(cluster, version string) promAlert {
		return promAlert{Labels: map[string]string{"severity": "warning", "cluster": cluster, "version": version}, Annotations: map[string]string{
			"summary":     replace(rule.Annotations["summary"], cluster, version),
			"description": replace(rule.Annotations["description"], cluster, version),
		}}
	}
	file := map[string]any{
		"rule_files":          []string{prometheusRulesFile(t)},
		"evaluation_interval": "1m",
		"tests": []promRuleTest{
			{Interval: "1m", Input: []promSeries{
				{info("exposed", "v1.19.0", "hub-a"), "1x30"},
				{info("exposed", "v1.19.0", "hub-b"), "1x30"},
				{info("rc", "1.19.0-rc.1", "hub-a"), "1x30"},
				{info("fixed", "v1.19.1", "hub-a"), "1x30"},
				{info("later", "v1.19.10", "hub-a"), "1x30"},
				{info("old", "v1.16.3", "hub-a"), "1x30"},
				{info("unknown", "", "hub-a"), "1x30"},
			}, Checks: []promCheck{
				{"5m", name, []promAlert{}},
				{"20m", name, []promAlert{fires("exposed", "v1.19.0"), fires("rc", "1.19.0-rc.1")}},
			}},
		},
	}
	promtoolTestRules(t, file)
}
