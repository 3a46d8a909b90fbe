package e2e

import (
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A dry-run FleetPolicy reports DryRun with the plan and diff in status, and nothing reaches the
// clusters.
func TestHubDryRunShowsPlanAndWritesNothing(t *testing.T) {
	startHub(t, 10*time.Minute)
	createFleetPolicy(t, `
metadata: {name: e2e-hub-dryrun}
spec:
  dryRun: true
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("hub-dryrun"))
	fp := waitFleetPolicy(t, "e2e-hub-dryrun", "dry-run in both",
		wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "DryRun", "cluster-2": "DryRun"}))
	for _, c := range fp.Clusters {
		if len(c.Plan) != 1 || c.Plan[0].Action != "Create" || !strings.Contains(c.Plan[0].Diff, "+  name: e2e-hub-dryrun") {
			t.Errorf("%s: plan %+v, want one Create with a diff", c.Name, c.Plan)
		}
	}
	if ready := findCondition(fp, policyhubv1.ConditionReady); ready == nil || ready.Reason != "DryRun" {
		t.Errorf("Ready condition %+v, want reason DryRun", ready)
	}
	if got := presence(t, "e2e-hub-dryrun"); got["cluster-1"] || got["cluster-2"] {
		t.Errorf("the dry-run created the policy: %v", got)
	}
}
