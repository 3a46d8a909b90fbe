package e2e

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A dry-run reports DryRun with the plan and a diff per change and persists nothing: a new policy
// stays absent, a changed one keeps its resourceVersion. A template real Kyverno rejects shows
// Kyverno's own error in the dry-run result.
func TestSyncDryRunPersistsNothingAndShowsKyvernoErrors(t *testing.T) {
	ctx := testContext(t)
	s := newSyncer(t)
	cluster := gatewayCluster(t, "cluster-2")

	fresh, freshSource := renderFleetPolicy(t, "e2e-dryrun-new", auditTemplate("dryrun-new"), nil)
	d := onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: freshSource, Objects: []*unstructured.Unstructured{fresh}, DryRun: true, Prune: true}}), policyhubv1.ClusterPhaseDryRun)
	if d.Actions.Created != 1 || len(d.Plan) != 1 || d.Plan[0].Action != "Create" || !strings.Contains(d.Plan[0].Diff, "+kind: ClusterPolicy") {
		t.Errorf("dry-run of a new policy: actions %+v, plan %+v", d.Actions, d.Plan)
	}
	if _, err := liveObject(t, "cluster-2", fresh); err == nil {
		t.Errorf("the dry-run created the policy")
	}

	// An existing policy whose declaration changed mode: the dry-run shows the change, writes nothing.
	existing, source := renderFleetPolicy(t, "e2e-dryrun-change", auditTemplate("dryrun-change"), nil)
	onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{existing}, Prune: true}}), policyhubv1.ClusterPhaseSynced)
	t.Cleanup(func() { s.Sync(ctx, cluster, []work.Declaration{{Source: source, Prune: true}}) })
	before, err := liveObject(t, "cluster-2", existing)
	if err != nil {
		t.Fatal(err)
	}
	enforce := policyhubv1.ModeEnforce
	changed, _ := renderFleetPolicy(t, "e2e-dryrun-change", auditTemplate("dryrun-change"), &enforce)
	res := s.Sync(ctx, cluster, []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{changed}, DryRun: true, Prune: true}})
	d = onlyResult(t, res, policyhubv1.ClusterPhaseDryRun)
	if d.Actions.Updated != 1 || len(d.Plan) != 1 || !strings.Contains(d.Plan[0].Diff, "-      failureAction: Audit") || !strings.Contains(d.Plan[0].Diff, "+      failureAction: Enforce") {
		t.Errorf("dry-run of a mode change: actions %+v, plan %+v", d.Actions, d.Plan)
	}
	if res.Writes != 0 {
		t.Errorf("the dry-run persisted %d writes", res.Writes)
	}
	after, err := liveObject(t, "cluster-2", existing)
	if err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the dry-run changed the policy: resourceVersion %s → %s", before.GetResourceVersion(), after.GetResourceVersion())
	}

	bad, badSource := renderFleetPolicy(t, "e2e-dryrun-rejected", kyvernoRefusedTemplate, nil)
	d = onlyResult(t, s.Sync(ctx, cluster, []work.Declaration{{Source: badSource, Objects: []*unstructured.Unstructured{bad}, DryRun: true}}), policyhubv1.ClusterPhaseFailed)
	if d.Actions.Failed != 1 || len(d.Plan) != 1 || d.Plan[0].Action != "Failed" {
		t.Fatalf("dry-run of a policy Kyverno rejects: actions %+v, plan %+v", d.Actions, d.Plan)
	}
	if !strings.Contains(d.Plan[0].Message, `admission webhook "validate-policy.kyverno.svc" denied the request`) ||
		!strings.Contains(d.Message, "wildcard policy not allowed in background mode") {
		t.Errorf("the dry-run result does not carry Kyverno's refusal: plan message %q, message %q", d.Plan[0].Message, d.Message)
	}
}
