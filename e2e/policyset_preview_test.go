package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/policyhub/policyhub/internal/registrytest"
)

// A new version pushed to a PolicySet's tag is previewed before the hub applies it: `kubectl
// policyhub sync --dry-run --policy pset/NAME` reads the source as the hub does and shows, per
// cluster, the member it would update (with the diff) and the one it would create; nothing is
// written and the hub still runs the version it read.
func TestPolicySetNewVersionIsPreviewedBeforeItIsApplied(t *testing.T) {
	startHub(t, time.Hour)
	const ns, user, password, name = "pset-preview-e2e", "platform", "s3cret", "e2e-pset-preview"
	reg := registrytest.Start(t, user, password)
	ref := reg.Host + "/policies/preview:stable"
	v1 := kyvernoPush(t, ref, user, password, map[string]string{"team.yaml": psAuditPolicy("pset-preview-team", ns, "team", "label team is required")})
	registrySecret(t, "preview-registry", reg.Host, user, password)
	// Read again only every 10 minutes: the hub does not see the new version during the test.
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    oci: {ref: %q, secretRef: {name: preview-registry}, interval: 10m}
  placement: {clusters: [cluster-1, cluster-2]}
`, name, ref))
	waitPolicySet(t, name, "version 1 in force", setInForce(v1, "cluster-1", "cluster-2"))
	before := clusterPolicy(t, "cluster-1", "pset-preview-team").GetResourceVersion()

	v2 := kyvernoPush(t, ref, user, password, map[string]string{
		"team.yaml": psAuditPolicy("pset-preview-team", ns, "team", "label team is required (v2)"),
		"tier.yaml": psAuditPolicy("pset-preview-tier", ns, "tier", "label tier is required"),
	})
	code, out, errOut := syncCheckRun(t, "", "sync", "--dry-run", "--policy", "pset/"+name, "-o", "json")
	if code != 0 {
		t.Fatalf("sync --dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	var report struct {
		Clusters []struct {
			Name         string
			Declarations []struct {
				Declaration string
				Phase       string
				Changes     []struct{ Action, Name, Diff string }
			}
		}
		Notes []struct{ Declaration, Message string }
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Notes) != 1 || !strings.Contains(report.Notes[0].Message, "its source holds a new version, planned here: "+v2) || !strings.Contains(report.Notes[0].Message, "the hub runs "+v1) {
		t.Errorf("notes %+v: want one saying version %s is planned while the hub runs %s", report.Notes, v2, v1)
	}
	if len(report.Clusters) != 2 {
		t.Fatalf("clusters %+v", report.Clusters)
	}
	for _, c := range report.Clusters {
		if len(c.Declarations) != 1 || c.Declarations[0].Declaration != "PolicySet/"+name || c.Declarations[0].Phase != "DryRun" {
			t.Errorf("%s: %+v", c.Name, c.Declarations)
			continue
		}
		var got []string
		for _, ch := range c.Declarations[0].Changes {
			got = append(got, ch.Action+" "+ch.Name)
			if ch.Action == "Update" && !strings.Contains(ch.Diff, "label team is required (v2)") {
				t.Errorf("%s: the update's diff lacks the new message:\n%s", c.Name, ch.Diff)
			}
		}
		sort.Strings(got)
		if fmt.Sprint(got) != "[Create pset-preview-tier Update pset-preview-team]" {
			t.Errorf("%s: planned %v, want the new member created and the changed one updated", c.Name, got)
		}
	}
	if clusterPolicy(t, "cluster-1", "pset-preview-tier") != nil || clusterPolicy(t, "cluster-1", "pset-preview-team").GetResourceVersion() != before {
		t.Error("the preview wrote to the cluster")
	}
	waitPolicySet(t, name, "the hub still at version 1", setInForce(v1, "cluster-1", "cluster-2"))
}
