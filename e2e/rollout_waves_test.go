package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Two waves, staging (cluster-1) then prod (cluster-2), and a policy an existing Deployment in
// staging violates. Staging runs it in Audit and holds with the measured fail count; once the
// Deployment is fixed the count reaches 0, the soak passes, staging switches to Enforce (Kyverno
// there refuses a new violating Deployment), and only then does prod get the policy, in Audit;
// prod completes and the FleetPolicy ends Ready with every wave Done.
func TestRolloutPromotesWaveByWave(t *testing.T) {
	inParallel(t)
	hub := startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	startAgentBeating(t, "cluster-2", 2*time.Second)
	ctx := testContext(t)
	const ns, name = "rollout-waves", "rollout-waves-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, c2, ns)
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatal(err)
	}
	if err := c2.Create(ctx, shopDeployment(ns, "web", "shop")); err != nil {
		t.Fatal(err)
	}

	createFleetPolicy(t, rolloutPolicy(name, ns, `
    - name: staging
      clusters: [cluster-1]
      gate: {maxFail: 0, soak: 4s}
    - name: prod
      clusters: [cluster-2]`, "team"))

	held := waitResults(t, name, "staging holds in Audit on its fail count", func(fp *fleetView) error {
		if w := wave(fp, "staging"); w.Phase != policyhubv1.WaveWaiting || w.Fail < 1 || !strings.Contains(w.Reason, "fail results, at most 0 allowed") {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	})
	if got := ruleField(t, "cluster-1", name, "validate", "failureAction"); got != "Audit" {
		t.Fatalf("staging holds, its policy must run in Audit: failureAction %q", got)
	}
	if presence(t, name)["cluster-2"] {
		t.Fatalf("prod got the policy while staging holds")
	}
	if w := wave(held, "prod"); w.Phase != policyhubv1.WavePending || clusterStatus(held, "cluster-2") != nil {
		t.Errorf("prod %+v, status %+v: want Pending and not in the status", w, clusterStatus(held, "cluster-2"))
	}
	if c := findCondition(held, policyhubv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RolloutProgressing" || !strings.Contains(c.Message, "wave staging Waiting") {
		t.Errorf("Ready while staging holds: %+v", c)
	}
	if v, ok := hub.scrape(t, "policyhub_rollout_wave_fail_results", map[string]string{"policy": name, "wave": "staging"}); !ok || v < 1 {
		t.Errorf("policyhub_rollout_wave_fail_results{wave=staging} = %v (found %v), want the measured count", v, ok)
	}

	labelDeployment(ctx, t, "cluster-1", ns, "web", map[string]string{"team": "shop"})
	// From here on, prod must never hold the policy before staging is Done.
	eventually(t, 3*time.Minute, 300*time.Millisecond, "every wave Done, in order", func() error {
		prodHolds := presence(t, name)["cluster-2"] // read before the status: the hub writes staging Done first
		fp := readFleetPolicy(t, name)
		if prodHolds && wave(fp, "staging").Phase != policyhubv1.WaveDone {
			t.Fatalf("prod got the policy while staging is %s", wavePhases(fp))
		}
		if wave(fp, "staging").Phase != policyhubv1.WaveDone || wave(fp, "prod").Phase != policyhubv1.WaveDone {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		if c := findCondition(fp, policyhubv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("every wave Done, Ready %+v", c)
		}
		return nil
	})
	eventually(t, 60*time.Second, time.Second, "Kyverno in staging refuses a new violating Deployment", func() error {
		err := c1.Create(ctx, shopDeployment(ns, "web-2", ""))
		if err == nil {
			_ = c1.Delete(ctx, shopDeployment(ns, "web-2", ""))
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), "Deployments need the labels team") {
			return fmt.Errorf("refused without the policy's message: %v", err)
		}
		return nil
	})
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		if got := ruleField(t, cluster, name, "validate", "failureAction"); got != "Enforce" {
			t.Errorf("%s: failureAction %q, want Enforce once its wave is Done", cluster, got)
		}
	}
	done := readFleetPolicy(t, name)
	if st := done.Status.Rollout; st.CurrentWave != "" || st.Stable == nil || st.Stable.Revision != st.Revision {
		t.Errorf("rollout %+v: want no current wave and the revision stable", st)
	}
	if v, ok := hub.scrape(t, "policyhub_rollout_wave_state", map[string]string{"policy": name, "wave": "prod", "state": "done"}); !ok || v != 1 {
		t.Errorf("policyhub_rollout_wave_state{wave=prod,state=done} = %v (found %v), want 1", v, ok)
	}
	// Every transition is an Event; the held gate a Warning with the measured count.
	eventually(t, 30*time.Second, 500*time.Millisecond, "the rollout's Events", func() error {
		list := &eventsv1.EventList{}
		if err := directClient(t, fleetOf(t).Hub.Config).List(ctx, list, client.InNamespace("default")); err != nil {
			return err
		}
		want := map[string]bool{"Warning WaveWaiting wave staging: Auditing -> Waiting": false, "Normal WaveEnforcing wave staging": false, "Normal WaveDone wave prod": false}
		for _, e := range list.Items {
			if e.Regarding.Name != name {
				continue
			}
			for w := range want {
				if strings.HasPrefix(e.Type+" "+e.Reason+" "+e.Note, w) {
					want[w] = true
				}
			}
		}
		for w, seen := range want {
			if !seen {
				return fmt.Errorf("no Event %q", w)
			}
		}
		return nil
	})
}
