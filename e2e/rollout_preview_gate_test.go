package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A rollout with a preview gate and a new version that would fail more resources than the gate
// allows: the version's shadow runs in both clusters, the preview completes with Kyverno's
// count, and wave 1 stays Pending with the measured value — the version itself reaches no
// cluster. Widening the gate starts wave 1 (the version arrives in Audit) and ends the preview.
func TestRolloutPreviewGateExceededNeverShipsWaveOne(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "rollout-preview", "rollout-preview-team"
	shadow := policyhubv1.ShadowName(name)
	for cluster, deployments := range map[string]map[string]string{
		"cluster-1": {"web": ""},
		"cluster-2": {"cart": "", "auth": "identity"},
	} {
		c := directClient(t, fleetOf(t).Cluster(cluster).Config)
		createNamespace(ctx, t, c, ns)
		for deployment, team := range deployments {
			if err := c.Create(ctx, shopDeployment(ns, deployment, team)); err != nil {
				t.Fatal(err)
			}
		}
	}
	createFleetPolicy(t, rolloutPolicy(name, ns, `
    - name: staging
      clusters: [cluster-1]
    - name: prod
      clusters: [cluster-2]
    previewGate: {maxWouldFail: 1}`, "team"))

	waitResults(t, name, "a complete preview over the gate, wave 1 held", func(fp *fleetView) error {
		p := fp.Status.Preview
		if p == nil || p.CompletedAt == nil || p.WouldFail != 2 || p.Shadow != shadow {
			return fmt.Errorf("preview %+v; waves %s; conditions %+v; clusters %+v", p, wavePhases(fp), fp.Status.Conditions, fp.Clusters)
		}
		if w := wave(fp, "staging"); w.Phase != policyhubv1.WavePending || !strings.Contains(w.Reason, "would fail 2 resources, at most 1 allowed") {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	})
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		if failing, err := shadowFailures(t, cluster, ns, shadow); err != nil || len(failing) != 1 {
			t.Errorf("%s: Kyverno's reports say the shadow fails %v (%v), want one Deployment", cluster, failing, err)
		}
	}
	holds(t, 5*time.Second, "the version over the gate reaches no cluster", func() error {
		if fp := readFleetPolicy(t, name); wave(fp, "staging").Phase != policyhubv1.WavePending {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		for _, cluster := range []string{"cluster-1", "cluster-2"} {
			if rolledOutPolicy(t, cluster, name) != nil {
				return fmt.Errorf("%s got the policy", cluster)
			}
			if rolledOutPolicy(t, cluster, shadow) == nil {
				return fmt.Errorf("%s has no shadow", cluster)
			}
		}
		return nil
	})

	// The same version within a wider gate ships to wave 1 in Audit; the preview is over.
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Rollout.PreviewGate.MaxWouldFail = ptrTo(int64(2)) })
	waitResults(t, name, "wave 1 auditing, no preview", func(fp *fleetView) error {
		if w := wave(fp, "staging"); w.Phase != policyhubv1.WaveAuditing && w.Phase != policyhubv1.WaveWaiting {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		if fp.Status.Preview != nil {
			return fmt.Errorf("preview %+v", fp.Status.Preview)
		}
		return nil
	})
	eventually(t, 30*time.Second, 200*time.Millisecond, "the version in cluster-1 in Audit, the shadows gone", func() error {
		if got := rolledOutPolicy(t, "cluster-1", name); got == nil {
			return fmt.Errorf("cluster-1 has no policy")
		}
		if got := ruleField(t, "cluster-1", name, "validate", "failureAction"); got != "Audit" {
			return fmt.Errorf("cluster-1 failureAction %q", got)
		}
		for _, cluster := range []string{"cluster-1", "cluster-2"} {
			if rolledOutPolicy(t, cluster, shadow) != nil {
				return fmt.Errorf("%s still has the shadow", cluster)
			}
		}
		if rolledOutPolicy(t, "cluster-2", name) != nil {
			return fmt.Errorf("prod got the policy before staging is done")
		}
		return nil
	})
}
