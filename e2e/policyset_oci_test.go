package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/internal/registrytest"
)

// psAuditPolicy is a ClusterPolicy that audits Pods of namespace ns for a label, with message.
func psAuditPolicy(name, ns, label, message string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
  annotations:
    policies.kyverno.io/severity: low
spec:
  rules:
  - name: check-%s
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaces: [%s]
    validate:
      failureAction: Audit
      message: %q
      pattern:
        metadata:
          labels:
            %s: "?*"
`, name, label, ns, message, label)
}

// A library pushed with the real `kyverno oci push` to a registry behind basic auth runs as one
// PolicySet: pinned to the artifact's digest, every member synced to both clusters and in force
// (Kyverno refuses a Deployment its Enforce member forbids). A new version — one member changed,
// one added, one removed — writes exactly those three objects in each cluster, prunes the removed
// one, and says so in status.changes; deleting the set prunes every member and its snapshots.
func TestPolicySetFromKyvernoOCIPushIsEnforced(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, user, password = "pset-oci-e2e", "platform", "s3cret"
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster1, ns)

	reg := registrytest.Start(t, user, password)
	latestYAML, err := yaml.Marshal(latestTagPolicy(t, "pset-disallow-latest", ns, "Enforce").Object)
	if err != nil {
		t.Fatal(err)
	}
	v1 := kyvernoPush(t, reg.Host+"/policies/platform:v1", user, password, map[string]string{
		"disallow-latest.yaml": string(latestYAML),
		"require-team.yaml":    psAuditPolicy("pset-require-team", ns, "team", "label team is required"),
		"retired.yaml":         psAuditPolicy("pset-retired", ns, "owner", "label owner is required"),
	})
	v2 := kyvernoPush(t, reg.Host+"/policies/platform:v2", user, password, map[string]string{
		"disallow-latest.yaml": string(latestYAML),
		"require-team.yaml":    psAuditPolicy("pset-require-team", ns, "team", "label team is required: see go/teams"),
		"require-tier.yaml":    psAuditPolicy("pset-require-tier", ns, "tier", "label tier is required"),
	})
	registrySecret(t, "platform-registry", reg.Host, user, password)

	const name = "e2e-pset-oci"
	ps := createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  source:
    oci:
      ref: %s/policies/platform:v1
      secretRef: {name: platform-registry}
  placement: {clusters: [cluster-1, cluster-2]}
`, name, reg.Host))
	set := waitPolicySet(t, name, "version 1 in force in both clusters", setInForce(v1, "cluster-1", "cluster-2"))
	if set.Status.Members.Total != 3 || set.Status.Source.Revision != reg.Host+"/policies/platform:v1" || set.Status.Source.Members != 3 {
		t.Errorf("members %+v, source %+v: want 3 members of the v1 tag", set.Status.Members, set.Status.Source)
	}
	if snaps := snapshotsOf(t, ps); len(snaps) != 1 || snaps[0] != set.Status.Source.Snapshot {
		t.Errorf("snapshots %v, want only %s", snaps, set.Status.Source.Snapshot)
	}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		for _, member := range []string{"pset-disallow-latest", "pset-require-team", "pset-retired"} {
			obj := clusterPolicy(t, cluster, member)
			if obj == nil {
				t.Fatalf("%s: member %s is not there", cluster, member)
			}
			if obj.GetAnnotations()[policyhubv1.AnnotationSource] != "PolicySet/"+name || obj.GetLabels()[policyhubv1.LabelManagedBy] != e2eHubID {
				t.Errorf("%s %s: annotations %v labels %v", cluster, member, obj.GetAnnotations(), obj.GetLabels())
			}
		}
	}
	var denial error
	eventually(t, 60*time.Second, time.Second, "Kyverno denies nginx:latest", func() error {
		if denial = cluster1.Create(ctx, deployment(ns, "web-latest", "nginx:latest"), client.DryRunAll); denial == nil {
			return fmt.Errorf("admitted")
		}
		return nil
	})
	assertKyvernoDenial(t, "dry-run create", denial, ns, "pset-disallow-latest")
	unchanged := clusterPolicy(t, "cluster-1", "pset-disallow-latest").GetResourceVersion()

	updatePolicySet(t, name, func(ps *policyhubv1.PolicySet) { ps.Spec.Source.OCI.Ref = reg.Host + "/policies/platform:v2" })
	set = waitPolicySet(t, name, "version 2 in force in both clusters", setInForce(v2, "cluster-1", "cluster-2"))
	ch := set.Status.Changes
	if ch == nil || ch.From != v1 || ch.To != v2 || fmt.Sprint(names(ch.Added), names(ch.Changed), names(ch.Removed)) != "[pset-require-tier] [pset-require-team] [pset-retired]" {
		t.Errorf("changes %+v: want pset-require-tier added, pset-require-team changed, pset-retired removed", ch)
	}
	for _, c := range set.Clusters {
		if want := (policyhubv1.ActionCounts{Created: 1, Updated: 1, Deleted: 1, Unchanged: 1}); c.Actions != want {
			t.Errorf("%s: the new version did %+v, want %+v: one write per changed member", c.Name, c.Actions, want)
		}
		if clusterPolicy(t, c.Name, "pset-retired") != nil {
			t.Errorf("%s: the removed member was not pruned", c.Name)
		}
		if obj := clusterPolicy(t, c.Name, "pset-require-team"); obj == nil || !strings.Contains(fmt.Sprint(obj.Object["spec"]), "see go/teams") {
			t.Errorf("%s: the changed member is not the new version", c.Name)
		}
	}
	if rv := clusterPolicy(t, "cluster-1", "pset-disallow-latest").GetResourceVersion(); rv != unchanged {
		t.Errorf("the unchanged member was written (resourceVersion %s, was %s)", rv, unchanged)
	}
	if snaps := snapshotsOf(t, ps); len(snaps) != 1 || snaps[0] != set.Status.Source.Snapshot {
		t.Errorf("snapshots %v, want only the new version's %s", snaps, set.Status.Source.Snapshot)
	}

	// kubectl policyhub status shows which version each cluster runs.
	code, out, errOut := syncCheckRun(t, "", "status", "pset/"+name, "-o", "json")
	var report struct {
		Declarations []struct {
			Kind, Revision, Digest string
			Members                int32
			Clusters               []struct{ Name, Phase, Revision string }
		}
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 || len(report.Declarations) != 1 {
		t.Fatalf("status pset/%s: exit %d, %v\n%s\n%s", name, code, err, out, errOut)
	}
	got := report.Declarations[0]
	if got.Kind != "PolicySet" || got.Digest != v2 || got.Members != 3 || !strings.HasSuffix(got.Revision, ":v2") || len(got.Clusters) != 2 ||
		got.Clusters[0].Revision != v2 || got.Clusters[1].Revision != v2 {
		t.Errorf("status pset/%s: %+v", name, got)
	}

	deletePolicySet(t, name)
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		for _, member := range []string{"pset-disallow-latest", "pset-require-team", "pset-require-tier"} {
			if clusterPolicy(t, cluster, member) != nil {
				t.Errorf("%s: %s is still there after the set was deleted", cluster, member)
			}
		}
	}
	if snaps := snapshotsOf(t, ps); len(snaps) != 0 {
		t.Errorf("snapshots %v outlive the set", snaps)
	}
}

func names(refs []policyhubv1.MemberRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}
