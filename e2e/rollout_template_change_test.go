package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A new template version rolls out from the first wave again, in Audit: when it makes the
// staging fail count rise past the gate, the rollout halts there with the reason, and prod keeps
// the version that completed the rollout before, in Enforce.
func TestRolloutTemplateChangeHaltsBeforeProd(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	startAgentBeating(t, "cluster-2", 2*time.Second)
	ctx := testContext(t)
	const ns, name = "rollout-change", "rollout-change-labels"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, c2, ns)
	// Both have a team label; only prod's has a tier label too.
	if err := c1.Create(ctx, shopDeployment(ns, "web", "shop")); err != nil {
		t.Fatal(err)
	}
	prodWeb := shopDeployment(ns, "web", "shop")
	prodWeb.Labels["tier"] = "frontend"
	if err := c2.Create(ctx, prodWeb); err != nil {
		t.Fatal(err)
	}
	const waves = `
    - name: staging
      clusters: [cluster-1]
      gate: {maxFail: 0}
    - name: prod
      clusters: [cluster-2]`
	createFleetPolicy(t, rolloutPolicy(name, ns, waves, "team"))
	first := waitResults(t, name, "the first version rolled out everywhere", func(fp *fleetView) error {
		if st := fp.Status.Rollout; st == nil || st.CurrentWave != "" || st.Stable == nil {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	})
	stable := first.Status.Rollout.Revision
	prodBefore := rolledOutPolicy(t, "cluster-2", name)
	if got := ruleField(t, "cluster-2", name, "validate", "failureAction"); prodBefore == nil || got != "Enforce" {
		t.Fatalf("prod after the first rollout: failureAction %q, want the policy in Enforce", got)
	}

	// The new version also asks for a tier label, which staging's Deployment lacks.
	stricter := &policyhubv1.FleetPolicy{}
	if err := yaml.Unmarshal([]byte(rolloutPolicy(name, ns, waves, "team", "tier")), stricter); err != nil {
		t.Fatal(err)
	}
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Template = stricter.Spec.Template })
	halted := waitResults(t, name, "staging halts the new version on its fail count", func(fp *fleetView) error {
		st := fp.Status.Rollout
		if st == nil || st.Revision == stable {
			return fmt.Errorf("still revision %s", stable)
		}
		if w := wave(fp, "staging"); w.Phase != policyhubv1.WaveWaiting || w.Fail < 1 || !strings.Contains(w.Reason, "fail results, at most 0 allowed") {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	})
	if st := halted.Status.Rollout; st.CurrentWave != "staging" || st.Stable == nil || st.Stable.Revision != stable {
		t.Errorf("rollout %+v: want it halted at staging, revision %s kept as stable", st, stable)
	}
	if p := rolledOutPolicy(t, "cluster-1", name); p == nil || ruleField(t, "cluster-1", name, "validate", "failureAction") != "Audit" || !strings.Contains(fmt.Sprint(p.Object["spec"]), "tier") {
		t.Errorf("staging holds the new version, in Audit: %v", p)
	}
	// The CLI's dry-run plans what the hub holds each cluster to: nothing to change anywhere
	// (a dry-run that rendered the spec's template for every cluster would update both).
	report, _ := syncCLIDryRunJSON(t, "--policy", name)
	for _, c := range report.Clusters {
		if len(c.Declarations) != 1 || c.Declarations[0].Actions.Unchanged != 1 || c.Declarations[0].Actions.Updated != 0 {
			t.Errorf("sync --dry-run in %s: %+v, want the rollout's version there, unchanged", c.Name, c.Declarations)
		}
	}
	holds(t, 5*time.Second, "prod keeps the previous version while staging halts", func() error {
		fp := readFleetPolicy(t, name)
		if w := wave(fp, "prod"); w.Phase != policyhubv1.WavePending {
			return fmt.Errorf("prod %s", wavePhases(fp))
		}
		p := rolledOutPolicy(t, "cluster-2", name)
		if p == nil || p.GetAnnotations()[policyhubv1.AnnotationContentHash] != prodBefore.GetAnnotations()[policyhubv1.AnnotationContentHash] {
			return fmt.Errorf("prod's policy changed: %v", p)
		}
		return nil
	})
}
