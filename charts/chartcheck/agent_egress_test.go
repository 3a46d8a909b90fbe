package chartcheck

import (
	"fmt"
	"slices"
	"testing"

	"github.com/policyhub/policyhub/internal/charttest"
)

// With egress restricted, the agent may reach its apiservers, DNS, and Kyverno's admission
// controller Pods on their metrics port only (their dry-run counts); the metrics URLs given
// reach the agent as its --kyverno-metrics-url flags, one each.
func TestChartAgentEgressReachesKyvernoMetrics(t *testing.T) {
	r := charttest.MustRender(t, agentChartDir, "policyhub-agent", "policyhub-system", charttest.Values(t, `
clusterName: c1
hubKubeconfigSecret: {name: k}
kyvernoNamespace: security
kyvernoMetricsURLs: ["http://10.0.0.5:8000/metrics", "http://10.0.0.6:8000/metrics"]
networkPolicy: {egress: {enabled: true, apiServerCIDRs: [10.0.0.1/32], dns: false}}`), charttest.HelmTemplate())
	_, rules := flattenEgress(t, r)
	want := []egressRule{
		{to: []string{"cidr 10.0.0.1/32"}, ports: []string{"TCP/443", "TCP/6443"}},
		{to: []string{"ns map[kubernetes.io/metadata.name:security] pods map[app.kubernetes.io/component:admission-controller]"}, ports: []string{"TCP/8000"}},
	}
	if got := fmt.Sprint(rules); got != fmt.Sprint(want) {
		t.Errorf("egress rules\n%s\nwant\n%s", got, fmt.Sprint(want))
	}
	args := charttest.Deployment(t, r).Spec.Template.Spec.Containers[0].Args
	for _, a := range []string{"--kyverno-metrics-url=http://10.0.0.5:8000/metrics", "--kyverno-metrics-url=http://10.0.0.6:8000/metrics"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %q lack %q", args, a)
		}
	}
}
