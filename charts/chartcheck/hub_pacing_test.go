package chartcheck

import (
	"slices"
	"testing"

	"github.com/policyhub/policyhub/internal/charttest"
)

// The hub's pacing budgets reach it as --summary-budget and --heartbeat-budget, the defaults
// (the API's) and fractions alike.
func TestChartHubPacingBudgets(t *testing.T) {
	for _, c := range []struct {
		name, values string
		want         []string
	}{
		{"defaults", `{}`, []string{"--summary-budget=10", "--heartbeat-budget=10"}},
		{"set", `pacing: {summaryBudget: 2.5, heartbeatBudget: 40}`, []string{"--summary-budget=2.5", "--heartbeat-budget=40"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := charttest.MustRender(t, hubChartDir, "policyhub-hub", "policyhub-system", charttest.Values(t, c.values), charttest.HelmTemplate())
			args := charttest.Deployment(t, r).Spec.Template.Spec.Containers[0].Args
			for _, a := range c.want {
				if !slices.Contains(args, a) {
					t.Errorf("args %q lack %q", args, a)
				}
			}
		})
	}
}
