package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A wave that asks for approval holds, its gate holding, until a person approves it with
// `kubectl policyhub rollout approve`; a paused rollout holds even an approved wave until
// `rollout resume`. The CLI's status shows where it is, and its mistakes are clear errors.
func TestRolloutApprovalAndPause(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgentBeating(t, "cluster-2", 2*time.Second)
	ctx := testContext(t)
	const ns, name = "rollout-approval", "rollout-approval-team"
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c2, ns)
	// A compliant Deployment: the policy has results to report, all passing.
	if err := c2.Create(ctx, shopDeployment(ns, "web", "shop")); err != nil {
		t.Fatal(err)
	}
	createFleetPolicy(t, rolloutPolicy(name, ns, `
    - name: prod
      clusters: [cluster-2]
      gate: {approval: true}`, "team"))

	waitingForApproval := func(fp *fleetView) error {
		if w := wave(fp, "prod"); w.Phase != policyhubv1.WaveWaiting || w.Reason != "waiting for approval" {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	}
	waitResults(t, name, "prod waits for approval", waitingForApproval)
	// It holds, and says so throughout: a summary its agent pushes meanwhile, which the hub observes
	// a moment later, does not flip it back to waiting for reports.
	holds(t, 4*time.Second, "an unapproved wave holds", func() error { return waitingForApproval(readFleetPolicy(t, name)) })
	if got := ruleField(t, "cluster-2", name, "validate", "failureAction"); got != "Audit" {
		t.Fatalf("a wave waiting for approval runs the policy in Audit: failureAction %q", got)
	}

	eventually(t, 30*time.Second, 500*time.Millisecond, "rollout status says prod waits for approval", func() error {
		code, out, errOut := cliReadRun(t, "rollout", "status", name)
		if code != 0 || !strings.Contains(out, "prod") || !strings.Contains(out, "Waiting") || !strings.Contains(out, "waiting for approval") {
			return fmt.Errorf("rollout status: exit %d\n%s%s", code, out, errOut)
		}
		return nil
	})
	if code, _, errOut := cliReadRun(t, "rollout", "approve", name, "staging"); code != 2 || !strings.Contains(errOut, `has no wave "staging"`) || !strings.Contains(errOut, "prod") {
		t.Errorf("approving a wave the rollout lacks: exit %d, %q; want exit 2 naming the waves", code, errOut)
	}

	if code, out, errOut := cliReadRun(t, "rollout", "pause", name); code != 0 {
		t.Fatalf("rollout pause: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := cliReadRun(t, "rollout", "approve", name, "prod")
	fp := readFleetPolicy(t, name)
	if code != 0 || !strings.Contains(out, "wave prod approved for revision "+fp.Status.Rollout.Revision) {
		t.Fatalf("rollout approve: exit %d\n%s%s", code, out, errOut)
	}
	if got := fp.Annotations[policyhubv1.AnnotationRolloutApproved]; got != "prod@"+fp.Status.Rollout.Revision {
		t.Errorf("approval annotation %q", got)
	}
	waitFleetPolicy(t, name, "the pause in the status", func(fp *fleetView) error {
		if c := findCondition(fp, policyhubv1.ConditionReady); c == nil || c.Reason != "RolloutPaused" {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	holds(t, 4*time.Second, "a paused rollout holds its approved wave", func() error { return waitingForApproval(readFleetPolicy(t, name)) })
	// kubectl policyhub status says why the FleetPolicy is not Ready, though its cluster is Synced
	// (not "Synced" and "-" alone).
	_, out, errOut = cliReadRun(t, "status", name)
	if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "FleetPolicy/"+name+" ") && strings.Contains(l, " <all> ") && strings.Contains(l, "RolloutPaused")
	}) {
		t.Errorf("status does not say the rollout is paused:\n%s%s", out, errOut)
	}

	if code, out, errOut := cliReadRun(t, "rollout", "resume", name); code != 0 {
		t.Fatalf("rollout resume: exit %d\n%s%s", code, out, errOut)
	}
	waitFleetPolicy(t, name, "resumed and approved: prod Done, Ready", func(fp *fleetView) error {
		if wave(fp, "prod").Phase != policyhubv1.WaveDone {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		if c := findCondition(fp, policyhubv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	if got := ruleField(t, "cluster-2", name, "validate", "failureAction"); got != "Enforce" {
		t.Errorf("an approved wave is promoted to Enforce: failureAction %q", got)
	}
}
