package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A team gates a Kyverno upgrade wave by wave: a FleetPolicy (a ValidatingPolicy, no legacy
// kind) rolls out in two waves, the first (cluster-1) gated on maxLegacyObjects 0. While a
// ClusterPolicy nobody in policyhub owns sits in cluster-1, the wave holds in Waiting with the
// measured count and the cluster named in its reason (status, `kubectl policyhub rollout status`),
// and the next wave does not start; once the ClusterPolicy is deleted, the agent reports 0 and the
// wave proceeds, then the next one, until the rollout is done.
func TestRolloutWaveGatedOnLegacyObjects(t *testing.T) {
	startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	startAgentBeating(t, "cluster-2", 2*time.Second)
	ctx := testContext(t)
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	// The clusters are shared by the tests: the earlier tests' legacy objects must be gone first.
	inventoryEventually(t, "cluster-1 reports no legacy object before the test's", func(r inventoryJSON) error {
		return r.wantCounts(map[string][2]int64{"cluster-1": {0, 0}})
	})
	unowned := legacyObject(ctx, t, c1, "ClusterPolicy", "", "e2e-legacy-gate-unowned")
	inventoryEventually(t, "cluster-1 reports the unowned ClusterPolicy", func(r inventoryJSON) error {
		return r.wantCounts(map[string][2]int64{"cluster-1": {0, 1}})
	})

	const name = "e2e-legacy-gate"
	createFleetPolicy(t, `
metadata: {name: `+name+`}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  rollout:
    waves:
    - name: kyverno-canary
      clusters: [cluster-1]
      gate: {maxLegacyObjects: 0}
    - name: rest
      clusters: [cluster-2]
  template:
    apiVersion: policies.kyverno.io/v1
    kind: ValidatingPolicy
    spec:
      validationActions: [Audit]
      matchConstraints:
        resourceRules:
        - apiGroups: [""]
          apiVersions: [v1]
          operations: [CREATE]
          resources: [configmaps]
      validations:
      - expression: "true"
`)
	held := waitResults(t, name, "kyverno-canary holds on cluster-1's legacy object", func(fp *fleetView) error {
		w := wave(fp, "kyverno-canary")
		if w.Phase != policyhubv1.WaveWaiting || w.LegacyObjects == nil || *w.LegacyObjects != 1 || !strings.Contains(w.Reason, "cluster-1 (1)") {
			return fmt.Errorf("waves %s; kyverno-canary %+v", wavePhases(fp), w)
		}
		return nil
	})
	if w := wave(held, "rest"); w.Phase != policyhubv1.WavePending {
		t.Errorf("rest is %s while kyverno-canary holds", w.Phase)
	}
	if presence(t, name)["cluster-2"] {
		t.Error("cluster-2 got the policy while kyverno-canary holds")
	}
	code, table, stderr := cliReadRun(t, "rollout", "status", name)
	if code != 0 || !strings.Contains(table, "LEGACY") || !strings.Contains(table, "kyverno-canary") || !strings.Contains(table, "cluster-1 (1)") {
		t.Errorf("rollout status: exit %d (%s)\n%s", code, stderr, table)
	}
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, "kyverno-canary") && !strings.Contains(line, " 1 ") {
			t.Errorf("rollout status does not show the wave's legacy count:\n%s", line)
		}
	}

	if err := c1.Delete(ctx, unowned); err != nil {
		t.Fatal(err)
	}
	waitResults(t, name, "every wave Done once the legacy object is gone", func(fp *fleetView) error {
		canary := wave(fp, "kyverno-canary")
		if canary.Phase != policyhubv1.WaveDone || wave(fp, "rest").Phase != policyhubv1.WaveDone {
			return fmt.Errorf("waves %s; kyverno-canary %+v", wavePhases(fp), canary)
		}
		if canary.LegacyObjects == nil || *canary.LegacyObjects != 0 {
			return fmt.Errorf("kyverno-canary measured %v legacy objects, want 0", canary.LegacyObjects)
		}
		return nil
	})
}
