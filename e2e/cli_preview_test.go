package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// kubectl policyhub preview on the fleet: -f starts a preview of a stricter candidate beside a
// live Audit policy, --wait waits until it is complete and --max-would-fail judges it (exit 1:
// two Deployments would fail, one of them newly), the plain command shows it again, and --end
// removes spec.preview and, with it, the shadow from the cluster.
func TestCLIPreviewStartsWaitsJudgesAndEnds(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, name = "cli-preview", "cli-preview-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	for deployment, team := range map[string]string{"web": "checkout", "api": ""} {
		if err := c1.Create(ctx, shopDeployment(ns, deployment, team)); err != nil {
			t.Fatal(err)
		}
	}
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1"))
	waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	candidate := filepath.Join(t.TempDir(), "candidate.yaml")
	if err := os.WriteFile(candidate, []byte(fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: %s-v2}
spec:
  background: true
  rules:
  - name: need-team-and-tier
    match:
      any:
      - resources:
          kinds: [Deployment]
          namespaces: [%s]
    validate:
      failureAction: Enforce
      message: "Deployments need team and tier labels"
      pattern:
        metadata:
          labels:
            team: "?*"
            tier: "?*"
`, name, ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	type report struct {
		Complete          bool  `json:"complete"`
		Clusters          int32 `json:"clusters"`
		Reported          int32 `json:"reported"`
		WouldFail         int64 `json:"wouldFail"`
		NewlyFailing      int64 `json:"newlyFailing"`
		FirstNewlyFailing []struct {
			Cluster, Name string
		} `json:"firstNewlyFailing"`
	}
	judge := func(out, what string) report {
		t.Helper()
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: not JSON (%v):\n%s", what, err, out)
		}
		if !r.Complete || r.Clusters != 1 || r.Reported != 1 || r.WouldFail != 2 || r.NewlyFailing != 1 ||
			len(r.FirstNewlyFailing) != 1 || r.FirstNewlyFailing[0].Cluster != "cluster-1" || r.FirstNewlyFailing[0].Name != "web" {
			t.Errorf("%s: %+v, want complete, 2 would fail, web newly failing in cluster-1", what, r)
		}
		return r
	}

	code, out, errOut := cliReadRun(t, "preview", name, "-f", candidate, "--wait", "--timeout", "3m", "--max-would-fail", "1", "-o", "json")
	if code != 1 {
		t.Fatalf("preview -f --wait --max-would-fail 1: exit %d, want 1 (2 would fail)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	judge(out, "preview -f --wait")
	if code, out, errOut = cliReadRun(t, "preview", name, "-o", "json"); code != 0 {
		t.Fatalf("preview: exit %d\n%s\n%s", code, out, errOut)
	}
	judge(out, "preview")

	shadow := policyhubv1.ShadowName(name + "-v2")
	if policyIn(t, "cluster-1", clusterPolicyGVK, shadow) == nil {
		t.Fatalf("no shadow %s in cluster-1 during the preview", shadow)
	}
	if code, out, errOut = cliReadRun(t, "preview", name, "--end"); code != 0 {
		t.Fatalf("preview --end: exit %d\n%s\n%s", code, out, errOut)
	}
	if fp := readFleetPolicy(t, name); fp.Spec.Preview != nil {
		t.Errorf("spec.preview still set after --end: %+v", fp.Spec.Preview)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the shadow removed from cluster-1", func() error {
		return clusterPolicyGone(t, "cluster-1", shadow)
	})
	if policyIn(t, "cluster-1", clusterPolicyGVK, name) == nil {
		t.Error("the live policy went with the preview")
	}
}
