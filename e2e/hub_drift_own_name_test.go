package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A cluster admin who applies the hub's own policy under the hub's field-manager name, with an
// exclude of a namespace in every rule, leaves managedFields naming policyhub's apply alone:
// nothing the hub could see by manager. The hub compares content instead (a dry-run of its own
// apply against what the cluster holds), finds the drift on its watch, removes the excludes
// within seconds, reports the update, and Kyverno refuses the violating Deployment in that
// namespace again.
func TestHubRemovesAnExcludeAppliedUnderItsFieldManager(t *testing.T) {
	hub := startHub(t, time.Hour) // no resync: the worker's watch sees the apply
	ctx := testContext(t)
	const ns = "drift-own-name"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)
	fp := createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-drift-own-name}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec:
      background: false
      rules:
      - name: require-image-tag
        match: {any: [{resources: {kinds: [Deployment], namespaces: [%[1]s]}}]}
        validate:
          failureAction: Enforce
          message: "an image tag is required"
          pattern: {spec: {template: {spec: {containers: [{image: "*:*"}]}}}}
      - name: validate-image-tag
        match: {any: [{resources: {kinds: [Deployment], namespaces: [%[1]s]}}]}
        validate:
          failureAction: Enforce
          message: "the image tag latest is not allowed: pin a version"
          pattern: {spec: {template: {spec: {containers: [{image: "!*:latest"}]}}}}`, ns))
	waitFleetPolicy(t, fp.Name, "in force", allInForce)
	latest := deployment(ns, "web-latest", "nginx:latest")
	deniedEventually(ctx, t, "cluster-1", latest, "Kyverno enforces the shipped policy")
	updates := hub.syncOps(t, "cluster-1", "updated")

	attack := applyExcludeAsPolicyhub(ctx, t, cluster, fp.Name, ns)
	edited := time.Now()
	eventually(t, 15*time.Second, 100*time.Millisecond, "the excludes removed", func() error {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(clusterPolicyGVK)
		if err := cluster.Get(ctx, client.ObjectKeyFromObject(attack), live); err != nil {
			return err
		}
		if n := excludedRules(live); n > 0 {
			return fmt.Errorf("%d rules still carry the exclude", n)
		}
		if live.GetLabels()[policyhubv1.LabelManagedBy] != e2eHubID {
			return fmt.Errorf("the restore lost the hub's label")
		}
		return nil
	})
	t.Logf("excludes applied under the hub's name removed in %.1fs", time.Since(edited).Seconds())

	// The hub saw drift and said so: an update, not "unchanged"; Synced and in force again. The
	// pass counts its update once its write returned, a moment after the cluster shows it.
	eventually(t, 10*time.Second, 100*time.Millisecond, "the update counted", func() error {
		if got := hub.syncOps(t, "cluster-1", "updated"); got <= updates {
			return fmt.Errorf("policyhub_sync_operations_total{action=updated} %v, want more than %v: the exclude was not removed as drift", got, updates)
		}
		return nil
	})
	waitFleetPolicy(t, fp.Name, "in force again, after an update", func(fp *fleetView) error {
		if err := allInForce(fp); err != nil {
			return err
		}
		c := fp.Clusters[0]
		if c.Actions.Updated != 1 || c.LastSyncTime == nil || c.LastSyncTime.Time.Before(edited.Add(-time.Second)) {
			return fmt.Errorf("last sync %v did %+v, want the update after the admin's apply at %v", c.LastSyncTime, c.Actions, edited)
		}
		return nil
	})

	t.Logf("passes that found the policy unchanged: %v", hub.syncOps(t, "cluster-1", "unchanged"))

	// The unsafe effect never lasts: the violator in the excluded namespace is refused.
	denial := deniedEventually(ctx, t, "cluster-1", latest, "Kyverno enforces in "+ns+" again")
	if !strings.Contains(denial.Error(), "the image tag latest is not allowed") {
		t.Errorf("refused, but not by the shipped policy: %v", denial)
	}
}

// A hub that starts over (a restart, another replica) remembers no verified state: its first
// sync asks the cluster once per owned object (a dry-run), later ones ask nothing while nothing
// changes. A dry-run declaration shows an exclude applied under the hub's name as an update, with
// one dry-run; the next real sync removes it.
func TestSyncVerifiesEachObjectOnceAndFindsAnExcludeUnderItsName(t *testing.T) {
	ctx := testContext(t)
	obj, source := renderFleetPolicy(t, "e2e-sync-own-name", auditTemplate("sync-own-name"), nil)
	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true}}
	cluster := gatewayCluster(t, "cluster-2")
	first := newSyncer(t)
	if d := onlyResult(t, first.Sync(ctx, cluster, decl), policyhubv1.ClusterPhaseSynced); d.Actions.Created != 1 {
		t.Fatalf("actions %+v, want created 1", d.Actions)
	}
	t.Cleanup(func() { first.Sync(ctx, cluster, []work.Declaration{{Source: source, Prune: true}}) })
	quiet := func(s *work.Syncer, what string, dryRuns int64) {
		t.Helper()
		res := s.Sync(ctx, cluster, decl)
		if d := onlyResult(t, res, policyhubv1.ClusterPhaseSynced); d.Actions.Unchanged != 1 || d.Actions.Updated+d.Actions.Created != 0 {
			t.Errorf("%s: actions %+v, want unchanged 1", what, d.Actions)
		}
		if res.DryRuns != dryRuns || res.Writes != 0 {
			t.Errorf("%s: %d dry-runs and %d writes (of %d requests), want %d dry-runs and no write", what, res.DryRuns, res.Writes, res.Requests, dryRuns)
		}
	}
	// What the hub wrote itself is verified by the write's answer.
	quiet(first, "the writer's resync", 0)
	restarted := newSyncer(t)
	quiet(restarted, "a restarted hub's first sync", 1)
	for i := range 3 {
		quiet(restarted, fmt.Sprintf("its resync %d", i+1), 0)
	}

	direct := directClient(t, fleetOf(t).Cluster("cluster-2").Config)
	attack := applyExcludeAsPolicyhub(ctx, t, direct, obj.GetName(), "sync-own-name")

	preview := newSyncer(t)
	dryRun := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{obj}, Prune: true, DryRun: true}}
	res := preview.Sync(ctx, cluster, dryRun)
	d := onlyResult(t, res, policyhubv1.ClusterPhaseDryRun)
	if d.Actions.Updated != 1 || len(d.Plan) != 1 || !removesExclude(d.Plan[0].Diff) {
		t.Errorf("dry-run: actions %+v, plan %+v; want an update that removes the exclude", d.Actions, d.Plan)
	}
	if res.DryRuns != 1 || res.Writes != 0 {
		t.Errorf("dry-run: %d dry-runs, %d writes; want one dry-run (the check's answer is the preview) and no write", res.DryRuns, res.Writes)
	}

	eventually(t, 10*time.Second, 100*time.Millisecond, "a sync removes the exclude", func() error {
		res := restarted.Sync(ctx, cluster, decl)
		if d := onlyResult(t, res, policyhubv1.ClusterPhaseSynced); d.Actions.Updated != 1 {
			return fmt.Errorf("actions %+v, want updated 1", d.Actions)
		}
		return nil
	})
	live, err := liveObject(t, "cluster-2", attack)
	if err != nil {
		t.Fatal(err)
	}
	if n := excludedRules(live); n > 0 {
		t.Errorf("%d rules still carry the exclude after the update", n)
	}
	quiet(restarted, "the resync after the update", 0)
}

// applyExcludeAsPolicyhub is a cluster admin's `kubectl apply --server-side
// --field-manager=policyhub --force-conflicts` of the hub's ClusterPolicy as the cluster holds it
// (`kubectl get -o yaml`, server fields dropped), with an exclude of namespace ns added to every
// rule. It checks the finding's premise, that managedFields then name policyhub's apply alone,
// and returns the cluster's answer.
func applyExcludeAsPolicyhub(ctx context.Context, t *testing.T, c client.Client, name, ns string) *unstructured.Unstructured {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(clusterPolicyGVK)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(live.Object, "spec")
	rules, _, _ := unstructured.NestedSlice(spec, "rules")
	for _, r := range rules {
		r.(map[string]any)["exclude"] = map[string]any{"any": []any{map[string]any{"resources": map[string]any{"namespaces": []any{ns}}}}}
	}
	spec["rules"] = rules
	edit := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	edit.SetGroupVersionKind(clusterPolicyGVK)
	edit.SetName(name)
	edit.SetLabels(live.GetLabels())
	edit.SetAnnotations(live.GetAnnotations())
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(edit), client.FieldOwner(work.FieldManager), client.ForceOwnership); err != nil {
		t.Fatalf("the admin's apply as policyhub: %v", err)
	}
	if n := excludedRules(edit); n != len(rules) || n == 0 {
		t.Fatalf("the admin's apply left %d of %d rules excluded", n, len(rules))
	}
	for _, e := range edit.GetManagedFields() {
		if e.Subresource == "" && (e.Manager != work.FieldManager || e.Operation != metav1.ManagedFieldsOperationApply) {
			t.Fatalf("managedFields name %s (%s): the premise is an apply under policyhub's name alone", e.Manager, e.Operation)
		}
	}
	return edit
}

// excludedRules counts the rules of a ClusterPolicy that carry an exclude.
func excludedRules(policy *unstructured.Unstructured) int {
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "rules")
	n := 0
	for _, r := range rules {
		if _, found := r.(map[string]any)["exclude"]; found {
			n++
		}
	}
	return n
}

// removesExclude says whether a diff takes an exclude out.
func removesExclude(diff string) bool {
	for _, line := range strings.Split(diff, "\n") {
		if strings.HasPrefix(line, "-") && strings.Contains(line, "exclude:") {
			return true
		}
	}
	return false
}
