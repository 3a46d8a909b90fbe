package chartcheck

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/policyhub/policyhub/internal/charttest"
)

// Bad values are refused when the chart is installed, by values.schema.json, with the path of
// the value at fault; the defaults (and the agent's two required values) pass `helm lint`.
func TestChartValuesSchema(t *testing.T) {
	for _, c := range []struct {
		chart, name, values string
		want                []string // every one must be in the error
	}{
		{hubChartDir, "hubId is a number", `hubId: 5`, []string{"'/hubId'", "got number, want string"}},
		{hubChartDir, "hubId is no label value", `hubId: "not a label"`, []string{"'/hubId'", "does not match pattern"}},
		{hubChartDir, "resyncInterval is no duration", `resyncInterval: ten`, []string{"'/resyncInterval'", "'ten' does not match pattern"}},
		{hubChartDir, "resyncInterval is zero", `resyncInterval: 0s`, []string{"'/resyncInterval'", "'0s' does not match pattern"}},
		{hubChartDir, "no image.repository", `image: {repository: null}`, []string{"'/image'", "missing property 'repository'"}},
		{hubChartDir, "bad pullPolicy", `image: {pullPolicy: Sometimes}`, []string{"'/image/pullPolicy'", "value must be one of"}},
		{hubChartDir, "unknown value", `hubID: x`, []string{"additional properties 'hubID' not allowed"}},
		{hubChartDir, "gateway namespace", `gateway: {secretNamespace: Vela_System}`, []string{"'/gateway/secretNamespace'", "does not match pattern"}},
		{hubChartDir, "log level", `log: {level: trace}`, []string{"'/log/level'", "value must be one of 'debug', 'info', 'error'"}},
		{hubChartDir, "port", `metrics: {port: 80800}`, []string{"'/metrics/port'", "maximum"}},
		{hubChartDir, "egress without the apiserver", `networkPolicy: {egress: {enabled: true}}`, []string{"'/networkPolicy/egress/apiServerCIDRs'", "minItems: got 0, want 1"}},
		{hubChartDir, "maxUnavailable", `podDisruptionBudget: {maxUnavailable: some}`, []string{"'/podDisruptionBudget/maxUnavailable'", "'some' does not match pattern"}},
		{hubChartDir, "metrics.secure", `metrics: {secure: "yes"}`, []string{"'/metrics/secure'", "got string, want boolean"}},
		// The audiences are joined into one comma-separated flag: a comma in one would split it.
		{hubChartDir, "two audiences in one", `metrics: {audiences: ["policyhub,other"]}`, []string{"'/metrics/audiences/0'", "does not match pattern"}},
		{hubChartDir, "a metrics reader without a name", `metrics: {readerSubjects: [{kind: ServiceAccount}]}`, []string{"'/metrics/readerSubjects/0'", "missing property 'name'"}},
		{hubChartDir, "alert window", `prometheusRule: {alerts: {syncFailing: {window: 15}}}`, []string{"'/prometheusRule/alerts/syncFailing/window'", "got number, want string"}},
		{hubChartDir, "no tenant budget", `maxObjectsPerTenantPerCluster: 0`, []string{"'/maxObjectsPerTenantPerCluster'", "minimum: got 0, want 1"}},
		{hubChartDir, "kubevela.enabled", `kubevela: {enabled: "yes"}`, []string{"'/kubevela/enabled'", "got string, want boolean"}},
		{hubChartDir, "no summary budget", `pacing: {summaryBudget: 0}`, []string{"'/pacing/summaryBudget'", "exclusiveMinimum"}},
		{hubChartDir, "heartbeat budget as text", `pacing: {heartbeatBudget: "10/s"}`, []string{"'/pacing/heartbeatBudget'", "got string, want number"}},
		// The lifetime lands in a CEL expression of the admission policy: only a Go duration passes.
		{hubChartDir, "exception lifetime in days", `exceptions: {maxLifetime: 90d}`, []string{"'/exceptions/maxLifetime'", "'90d' does not match pattern"}},
		{hubChartDir, "exception lifetime quoting out", `exceptions: {maxLifetime: "1h') || true || ('"}`, []string{"'/exceptions/maxLifetime'", "does not match pattern"}},
		{agentChartDir, "no clusterName", `hubKubeconfigSecret: {name: hub-kubeconfig}`, []string{"missing property 'clusterName'"}},
		{agentChartDir, "clusterName is no DNS label", `{clusterName: Cluster_1, hubKubeconfigSecret: {name: hub-kubeconfig}}`, []string{"'/clusterName'", "'Cluster_1' does not match pattern"}},
		{agentChartDir, "no hub kubeconfig Secret", `clusterName: cluster-1`, []string{"'/hubKubeconfigSecret'", "missing property 'name'"}},
		{agentChartDir, "maxViolations above 200", `{clusterName: c1, hubKubeconfigSecret: {name: k}, maxViolations: 500}`, []string{"'/maxViolations'", "maximum: got 500, want 200"}},
		{agentChartDir, "pushInterval is no duration", `{clusterName: c1, hubKubeconfigSecret: {name: k}, pushInterval: "10"}`, []string{"'/pushInterval'", "does not match pattern"}},
		{agentChartDir, "egress without the apiservers", `{clusterName: c1, hubKubeconfigSecret: {name: k}, networkPolicy: {egress: {enabled: true, apiServerCIDRs: []}}}`,
			[]string{"'/networkPolicy/egress/apiServerCIDRs'", "minItems: got 0, want 1"}},
		{agentChartDir, "applicationLabel", `{clusterName: c1, hubKubeconfigSecret: {name: k}, applicationLabel: "app name"}`, []string{"'/applicationLabel'", "does not match pattern"}},
		{agentChartDir, "a Kyverno metrics URL that is no http URL", `{clusterName: c1, hubKubeconfigSecret: {name: k}, kyvernoMetricsURLs: ["file:///etc/passwd"]}`,
			[]string{"'/kyvernoMetricsURLs/0'", "does not match pattern"}},
		{agentChartDir, "a Kyverno metrics URL smuggling a flag", `{clusterName: c1, hubKubeconfigSecret: {name: k}, kyvernoMetricsURLs: ["http://a:8000/metrics --hub-kubeconfig=/x"]}`,
			[]string{"'/kyvernoMetricsURLs/0'", "does not match pattern"}},
		{agentChartDir, "kyvernoNamespace is no DNS label", `{clusterName: c1, hubKubeconfigSecret: {name: k}, kyvernoNamespace: "kyverno --enablePolicyException"}`,
			[]string{"'/kyvernoNamespace'", "does not match pattern"}},
	} {
		t.Run(filepath.Base(c.chart)+"/"+c.name, func(t *testing.T) {
			_, err := charttest.Render(t, c.chart, "release", "policyhub-system", charttest.Values(t, c.values), charttest.HelmTemplate())
			if err == nil {
				t.Fatalf("values %s were accepted", c.values)
			}
			msg := err.Error()
			for _, w := range append([]string{"values don't meet the specifications of the schema"}, c.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("values %s: the error does not say %q:\n%s", c.values, w, msg)
				}
			}
		})
	}
	// A budget that would block every drain is refused when rendered.
	if _, err := charttest.Render(t, hubChartDir, "release", "policyhub-system", charttest.Values(t, `podDisruptionBudget: {minAvailable: 1}`), charttest.HelmTemplate()); err == nil ||
		!strings.Contains(err.Error(), "podDisruptionBudget.minAvailable (1) must be below replicaCount (1)") {
		t.Errorf("minAvailable 1 with one replica: %v, want it refused", err)
	}
	// Without a fleet on purpose: what `helm lint --strict` checks (Chart.yaml, values against the
	// schema, templates render to valid YAML, no deprecated APIs).
	for _, c := range []struct{ chart, values string }{
		{hubChartDir, `{}`},
		{hubChartDir, `{metrics: {serviceMonitor: {enabled: true}}, prometheusRule: {enabled: true}, kubevela: {enabled: true}}`},
		{agentChartDir, `{clusterName: cluster-1, hubKubeconfigSecret: {name: hub-kubeconfig}}`},
		{agentChartDir, `{clusterName: cluster-1, agent: {enabled: false}, hubAccess: {enabled: true, createNamespace: true}}`},
	} {
		linter := lint.All(c.chart, charttest.Values(t, c.values), "policyhub-system", true)
		for _, m := range linter.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %s with %s: %v", c.chart, c.values, m)
			}
		}
	}
}
