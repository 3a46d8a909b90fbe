package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/internal/gittest"
)

// A platform team keeps its policies in Git, one folder per environment (the Flux + Kyverno
// layout), and two PolicySets read the same GitRepository through Flux's real source-controller,
// which clones it from a Git server on 127.0.0.1: staging's folder goes to cluster-1, production's
// to cluster-2. A commit that changes one of staging's policies reaches cluster-1 (that one object
// updated) and is no new version of production: nothing is written there.
func TestPolicySetsFromAGitRepositoryThroughFlux(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "pset-git-e2e"
	repo := gittest.Serve(t)
	first := repo.Commit(t, "policies per environment", map[string]string{
		"README.md":                           "# Our Kyverno policies, one folder per environment\n",
		"clusters/staging/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [team.yaml]\n",
		"clusters/staging/team.yaml":          psAuditPolicy("pset-git-team", ns, "team", "label team is required"),
		"clusters/production/policies.yaml": psAuditPolicy("pset-git-team", ns, "team", "label team is required") + "---\n" +
			psAuditPolicy("pset-git-tier", ns, "tier", "label tier is required"),
	})

	hub := directClient(t, fleetOf(t).Hub.Config)
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.FluxNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gitRepo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policyhubv1.FluxSourceGroupVersion.String(), "kind": "GitRepository",
		"metadata": map[string]any{"name": "platform-policies", "namespace": fleet.FluxNamespace},
		"spec":     map[string]any{"url": repo.URL, "interval": "2s", "ref": map[string]any{"branch": repo.Branch}},
	}}
	if err := hub.Create(ctx, gitRepo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), gitRepo) })

	for env, cluster := range map[string]string{"staging": "cluster-1", "production": "cluster-2"} {
		createPolicySet(t, fmt.Sprintf(`
metadata: {name: e2e-pset-git-%s}
spec:
  source:
    fluxSource: {kind: GitRepository, name: platform-policies, namespace: %s, path: clusters/%s}
  placement: {clusters: [%s]}
`, env, fleet.FluxNamespace, env, cluster))
	}
	atCommit := func(sha string, members int32, cluster string) func(*setView) error {
		return func(s *setView) error {
			if s.Status.Source == nil || s.Status.Source.Revision != repo.Branch+"@sha1:"+sha || s.Status.Source.Members != members {
				return fmt.Errorf("source %+v, want %d members at commit %s", s.Status.Source, members, sha)
			}
			return setInForce(s.Status.Source.Digest, cluster)(s)
		}
	}
	staging := waitPolicySet(t, "e2e-pset-git-staging", "staging's folder in force in cluster-1", atCommit(first, 1, "cluster-1"))
	production := waitPolicySet(t, "e2e-pset-git-production", "production's folder in force in cluster-2", atCommit(first, 2, "cluster-2"))
	if staging.Status.Source.Skipped != 1 {
		t.Errorf("staging skipped %d documents, want the kustomization.yaml", staging.Status.Source.Skipped)
	}
	if clusterPolicy(t, "cluster-1", "pset-git-tier") != nil {
		t.Error("production's policy reached staging's cluster")
	}
	prodTeam := clusterPolicy(t, "cluster-2", "pset-git-team").GetResourceVersion()

	second := repo.Commit(t, "staging: say where to find the teams", map[string]string{
		"clusters/staging/team.yaml": psAuditPolicy("pset-git-team", ns, "team", "label team is required: see go/teams"),
	})
	staging = waitPolicySet(t, "e2e-pset-git-staging", "the commit in force in cluster-1", func(s *setView) error {
		if s.Status.Source.Digest == staging.Status.Source.Digest {
			return fmt.Errorf("still the first version")
		}
		return atCommit(second, 1, "cluster-1")(s)
	})
	if ch := staging.Status.Changes; ch == nil || fmt.Sprint(names(ch.Added), names(ch.Changed), names(ch.Removed)) != "[] [pset-git-team] []" {
		t.Errorf("changes %+v: want pset-git-team changed", staging.Status.Changes)
	}
	if c := staging.Clusters[0]; c.Actions != (policyhubv1.ActionCounts{Updated: 1}) {
		t.Errorf("cluster-1 did %+v, want the one member updated", c.Actions)
	}
	// The commit changed nothing under production's folder: the same version, at the new commit.
	production = waitPolicySet(t, "e2e-pset-git-production", "production read at the new commit", func(s *setView) error {
		if s.Status.Source.Digest != production.Status.Source.Digest {
			return fmt.Errorf("a new version %s of production (was %s)", s.Status.Source.Digest, production.Status.Source.Digest)
		}
		return atCommit(second, 2, "cluster-2")(s)
	})
	if got := clusterPolicy(t, "cluster-2", "pset-git-team").GetResourceVersion(); got != prodTeam {
		t.Errorf("production's policy was written for a commit to staging (resourceVersion %s, was %s)", got, prodTeam)
	}
}
