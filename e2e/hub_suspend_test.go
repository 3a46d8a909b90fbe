package e2e

import (
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A suspended FleetPolicy is not synced (a change waits in the spec) and not pruned; its status
// says Suspended. Resuming syncs the change.
func TestHubSuspendStopsSyncingWithoutPruning(t *testing.T) {
	inParallel(t)
	startHub(t, 10*time.Minute)
	fp := createFleetPolicy(t, `
metadata: {name: e2e-suspend}
spec:
  mode: Enforce
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("suspend"))
	waitFleetPolicy(t, fp.Name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	audit := policyhubv1.ModeAudit
	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Suspend = true
		fp.Spec.Mode = &audit
		fp.Spec.Placement.Clusters = nil // would prune cluster-1 if not suspended
	})
	waitFleetPolicy(t, fp.Name, "suspended", func(fp *fleetView) error {
		if c := findCondition(fp, policyhubv1.ConditionReady); c == nil || c.Reason != "Suspended" {
			return errorf("Ready %+v, want reason Suspended", c)
		}
		return nil
	})
	if got := ruleField(t, "cluster-1", fp.Name, "validate", "failureAction"); got != "Enforce" {
		t.Errorf("a suspended FleetPolicy was synced or pruned: failureAction %q", got)
	}

	updateFleetPolicy(t, fp.Name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Suspend = false
		fp.Spec.Placement.Clusters = []string{"cluster-1"}
	})
	waitFleetPolicy(t, fp.Name, "resumed and synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	if got := ruleField(t, "cluster-1", fp.Name, "validate", "failureAction"); got != "Audit" {
		t.Errorf("the change made while suspended was not synced on resume: failureAction %q", got)
	}
}
