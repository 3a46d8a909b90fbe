package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// psDeploymentPolicy is a ClusterPolicy requiring a label on the Deployments of namespace ns.
func psDeploymentPolicy(name, ns, label, message string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: true
  rules:
  - name: need-%s
    match:
      any:
      - resources:
          kinds: [Deployment]
          namespaces: [%s]
    validate:
      failureAction: Enforce
      message: %q
      pattern:
        metadata:
          labels:
            %s: "?*"
`, name, label, ns, message, label)
}

// A PolicySet from a library ConfigMap on the hub rolls out as one unit, wave by wave. Version 1
// completes both waves. Version 2 — one member changed, one added, one removed — goes to staging
// first, in Audit, and holds there on the fail count of the set's policies (the added member
// fails on staging's Deployment) while prod keeps version 1 whole (the removed member included);
// once staging's Deployment is fixed, staging is promoted and prod gets version 2, the removed
// member pruned there only then.
func TestPolicySetRollsOutANewVersionWaveByWave(t *testing.T) {
	inParallel(t)
	testHub := startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	startAgentBeating(t, "cluster-2", 2*time.Second)
	ctx := testContext(t)
	const ns, name = "pset-rollout", "e2e-pset-rollout"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	c2 := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	createNamespace(ctx, t, c1, ns)
	createNamespace(ctx, t, c2, ns)
	web := shopDeployment(ns, "web", "shop")
	if err := c1.Create(ctx, web.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	prodWeb := shopDeployment(ns, "web", "shop")
	prodWeb.Labels["tier"] = "frontend"
	if err := c2.Create(ctx, prodWeb); err != nil {
		t.Fatal(err)
	}

	hub := directClient(t, fleetOf(t).Hub.Config)
	library := createLibrary(t, "pset-rollout-library", "rollout", map[string]string{
		"team.yaml":   psDeploymentPolicy("pset-ro-team", ns, "team", "Deployments need a team"),
		"app.yaml":    psDeploymentPolicy("pset-ro-app", ns, "app", "Deployments need an app"),
		"notes.md":    "not a policy: not read",
		"ignore.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: not-a-policy}\n",
	})

	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    configMaps:
      selector: {matchLabels: {library: rollout}}
  placement: {clusters: [cluster-1, cluster-2]}
  rollout:
    waves:
    - name: staging
      clusters: [cluster-1]
      gate: {maxFail: 0, soak: 2s}
    - name: prod
      clusters: [cluster-2]
`, name))
	v1 := waitPolicySet(t, name, "version 1 done in both waves", func(s *setView) error {
		if s.Status.Source == nil || s.Status.Rollout == nil || s.Status.Rollout.CurrentWave != "" || s.Status.Rollout.Stable == nil {
			return fmt.Errorf("source %+v, rollout %s", s.Status.Source, phasesOf(s.Status.Rollout))
		}
		return setInForce(s.Status.Source.Digest, "cluster-1", "cluster-2")(s)
	})
	d1 := v1.Status.Source.Digest
	if v1.Status.Source.Members != 2 || v1.Status.Source.Skipped != 1 || v1.Status.Source.Revision != "configmaps" {
		t.Errorf("source %+v: want 2 members and the Namespace skipped", v1.Status.Source)
	}
	if st := v1.Status.Rollout.Stable; st.Snapshot != v1.Status.Source.Snapshot || st.Revision != v1.Status.Rollout.Revision || !strings.HasPrefix(d1, "sha256:"+st.Revision) {
		t.Errorf("stable %+v, source %+v: want version 1's snapshot and revision", st, v1.Status.Source)
	}

	// Version 2: team changed, app removed, tier added (staging's Deployment has no tier).
	library.Data = map[string]string{
		"team.yaml": psDeploymentPolicy("pset-ro-team", ns, "team", "Deployments need a team (see go/teams)"),
		"tier.yaml": psDeploymentPolicy("pset-ro-tier", ns, "tier", "Deployments need a tier"),
	}
	if err := hub.Update(ctx, library); err != nil {
		t.Fatal(err)
	}
	held := waitPolicySet(t, name, "version 2 holds in staging on its fail count", func(s *setView) error {
		if s.Status.Source.Digest == d1 {
			return fmt.Errorf("still version 1")
		}
		if w := waveOf(s.Status.Rollout, "staging"); w.Phase != policyhubv1.WaveWaiting || w.Fail < 1 {
			return fmt.Errorf("waves %s", phasesOf(s.Status.Rollout))
		}
		// The member that holds the wave is named, with its violations where they are.
		for _, a := range s.Status.AttentionMembers {
			if a.Name == "pset-ro-tier" && a.Action == "Violating" && a.Cluster == "cluster-1" && a.Violations >= 1 && s.Status.Members.Violating >= 1 {
				return nil
			}
		}
		return fmt.Errorf("attention members %+v, members %+v: want pset-ro-tier Violating in cluster-1", s.Status.AttentionMembers, s.Status.Members)
	})
	d2 := held.Status.Source.Digest
	revisions := map[string]string{}
	for _, c := range held.Clusters {
		revisions[c.Name] = c.Revision
	}
	if revisions["cluster-1"] != d2 || revisions["cluster-2"] != d1 {
		t.Errorf("revisions %v: want staging at version 2 (%s) and prod at version 1 (%s)", revisions, d2, d1)
	}
	if got := ruleField(t, "cluster-1", "pset-ro-tier", "validate", "failureAction"); got != "Audit" {
		t.Errorf("staging holds: the new member must run in Audit there, failureAction %q", got)
	}
	if clusterPolicy(t, "cluster-1", "pset-ro-app") != nil {
		t.Error("staging kept the member version 2 removed")
	}
	if clusterPolicy(t, "cluster-2", "pset-ro-app") == nil || clusterPolicy(t, "cluster-2", "pset-ro-tier") != nil ||
		strings.Contains(fmt.Sprint(clusterPolicy(t, "cluster-2", "pset-ro-team").Object["spec"]), "go/teams") {
		t.Error("prod does not hold version 1 whole while staging holds")
	}
	if ch := held.Status.Changes; ch == nil || ch.From != d1 || fmt.Sprint(names(ch.Added), names(ch.Changed), names(ch.Removed)) != "[pset-ro-tier] [pset-ro-team] [pset-ro-app]" {
		t.Errorf("changes %+v", held.Status.Changes)
	}

	if v, ok := testHub.scrape(t, "policyhub_rollout_wave_state", map[string]string{"policy": "pset/" + name, "wave": "staging", "state": "waiting"}); !ok || v != 1 {
		t.Errorf("policyhub_rollout_wave_state{policy=pset/%s,wave=staging,state=waiting} = %v (found %v), want 1", name, v, ok)
	}
	// kubectl policyhub rollout status shows the set's waves, as a FleetPolicy's.
	code, out, errOut := syncCheckRun(t, "", "rollout", "status", "pset/"+name, "-o", "json")
	var report map[string]*policyhubv1.RolloutStatus
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("rollout status pset/%s: exit %d, %v\n%s\n%s", name, code, err, out, errOut)
	}
	if st := report["pset/"+name]; st == nil || st.CurrentWave != "staging" || st.Revision != held.Status.Rollout.Revision || st.Stable == nil || st.Stable.Snapshot == "" {
		t.Errorf("rollout status pset/%s: %+v", name, st)
	}

	labelDeployment(ctx, t, "cluster-1", ns, "web", map[string]string{"tier": "frontend"})
	done := waitPolicySet(t, name, "version 2 done in both waves", func(s *setView) error {
		if s.Status.Rollout == nil || s.Status.Rollout.CurrentWave != "" {
			return fmt.Errorf("waves %s", phasesOf(s.Status.Rollout))
		}
		return setInForce(d2, "cluster-1", "cluster-2")(s)
	})
	if clusterPolicy(t, "cluster-2", "pset-ro-app") != nil {
		t.Error("prod kept the removed member after version 2 reached it")
	}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		if got := ruleField(t, cluster, "pset-ro-tier", "validate", "failureAction"); got != "Enforce" {
			t.Errorf("%s: failureAction %q, want Enforce once its wave is Done", cluster, got)
		}
	}
	if st := done.Status.Rollout.Stable; st.Snapshot != done.Status.Source.Snapshot {
		t.Errorf("stable %+v: want version 2's snapshot %s", st, done.Status.Source.Snapshot)
	}
}
