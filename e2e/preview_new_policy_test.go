package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A preview of a new Enforce FleetPolicy on two clusters with violating Deployments: the hub
// ships only the report-only shadow; its counts, per cluster and in total, are Kyverno's own
// background results for the shadow, the newly failing Deployments are named, a violating
// Deployment created meanwhile is admitted (and counted), no cluster counts the policy in
// force, and when the preview ends the shadow is gone from both clusters (the live policy
// enforces instead), and nothing of the FleetPolicy remains once it is deleted.
func TestPreviewOfANewEnforcePolicy(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "preview-new", "preview-new-team"
	shadow := policyhubv1.ShadowName(name)
	clients := map[string]client.Client{}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		clients[cluster] = directClient(t, fleetOf(t).Cluster(cluster).Config)
		createNamespace(ctx, t, clients[cluster], ns)
	}
	// cluster-1: one without a team, one with; cluster-2: two without, one with.
	for cluster, deployments := range map[string]map[string]string{
		"cluster-1": {"web": "", "api": "checkout"},
		"cluster-2": {"cart": "", "search": "", "auth": "identity"},
	} {
		for deployment, team := range deployments {
			if err := clients[cluster].Create(ctx, shopDeployment(ns, deployment, team)); err != nil {
				t.Fatalf("%s: create Deployment %s before any policy: %v", cluster, deployment, err)
			}
		}
	}

	// teamLabelPolicy in Enforce, previewed when created: spec.preview without a template holds
	// it back, nothing but its shadow ships.
	createFleetPolicy(t, strings.Replace(teamLabelPolicy(name, ns, "Enforce", "cluster-1", "cluster-2"), "\nspec:\n", "\nspec:\n  preview: {}\n", 1))

	// While the preview runs, a Deployment the policy forbids is admitted: the shadow never
	// denies (Kyverno had the shadow before this create: the first result below shows it).
	waitFleetPolicy(t, name, "the shadow's first results in cluster-1", func(fp *fleetView) error {
		if c := clusterStatus(fp, "cluster-1"); c == nil || c.Preview == nil || !c.Preview.Reported || c.Preview.WouldFail < 1 {
			return fmt.Errorf("cluster-1: %+v", c)
		}
		return nil
	})
	if err := clients["cluster-1"].Create(ctx, shopDeployment(ns, "late", "")); err != nil {
		t.Fatalf("a violating Deployment created during the preview was refused: %v", err)
	}

	wantFailing := map[string][]string{"cluster-1": {"late", "web"}, "cluster-2": {"cart", "search"}}
	fp := waitFleetPolicy(t, name, "a complete preview: 2 would-fail in each cluster, as Kyverno reports them", func(fp *fleetView) error {
		p := fp.Status.Preview
		if p == nil || p.CompletedAt == nil || p.Clusters != 2 || p.Reported != 2 || p.WouldFail != 4 || p.NewlyFailing != 4 || p.Shadow != shadow {
			return fmt.Errorf("preview %+v", p)
		}
		for cluster, failing := range wantFailing {
			c := clusterStatus(fp, cluster)
			if c == nil || c.Preview == nil || c.Preview.WouldFail != int64(len(failing)) || c.Preview.NewlyFailing != int64(len(failing)) {
				return fmt.Errorf("%s: %+v", cluster, c)
			}
			// Kyverno's own word: the shadow's fail results in the cluster's reports.
			if kyverno, err := shadowFailures(t, cluster, ns, shadow); err != nil || !slices.Equal(kyverno, failing) {
				return fmt.Errorf("%s: Kyverno's reports say the shadow fails %v (%v), want %v", cluster, kyverno, err, failing)
			}
			if c.InForce != nil && *c.InForce {
				return fmt.Errorf("%s counts the policy in force, but only its shadow runs there", cluster)
			}
		}
		return nil
	})
	var named []string
	for _, r := range fp.Status.Preview.FirstNewlyFailing {
		named = append(named, r.Cluster+"/"+r.Resource.Namespace+"/"+r.Resource.Name)
	}
	sort.Strings(named)
	if want := []string{"cluster-1/preview-new/late", "cluster-1/preview-new/web", "cluster-2/preview-new/cart", "cluster-2/preview-new/search"}; !slices.Equal(named, want) {
		t.Errorf("newly failing named %v, want %v", named, want)
	}
	for cluster := range wantFailing {
		if c := clusterStatus(fp, cluster); c.Results != nil && c.Results.Fail != 0 {
			t.Errorf("%s: the shadow's failures count as the policy's results %+v: a preview never counts toward compliance", cluster, c.Results)
		}
	}

	// The preview ends: the shadow goes, the policy itself enforces.
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Preview = nil })
	for cluster := range wantFailing {
		waitRefused(t, cluster, ns, "Deployments need a team label")
		eventually(t, 30*time.Second, 200*time.Millisecond, "the shadow removed from "+cluster, func() error {
			return clusterPolicyGone(t, cluster, shadow)
		})
	}
	waitFleetPolicy(t, name, "no preview in the status", func(fp *fleetView) error {
		if fp.Status.Preview != nil {
			return fmt.Errorf("preview %+v", fp.Status.Preview)
		}
		for cluster := range wantFailing {
			if c := clusterStatus(fp, cluster); c == nil || c.Preview != nil {
				return fmt.Errorf("%s: %+v", cluster, c)
			}
		}
		return nil
	})
	deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	for cluster := range wantFailing {
		if err := clusterPolicyGone(t, cluster, name); err != nil {
			t.Error(err)
		}
		if err := clusterPolicyGone(t, cluster, shadow); err != nil {
			t.Error(err)
		}
	}
}

// shadowFailures are the Deployments of namespace the policy fails in the cluster's
// PolicyReports, sorted.
func shadowFailures(t *testing.T, cluster, namespace, policy string) ([]string, error) {
	t.Helper()
	// Kyverno writes wgpolicyk8s.io PolicyReports, or openreports.io Reports where it is told to
	// (cluster-2 of the shared fleet).
	var items []unstructured.Unstructured
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReportList"},
		{Group: "openreports.io", Version: "v1alpha1", Kind: "ReportList"},
	} {
		reports := &unstructured.UnstructuredList{}
		reports.SetGroupVersionKind(gvk)
		if err := directClient(t, fleetOf(t).Cluster(cluster).Config).List(testContext(t), reports, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		items = append(items, reports.Items...)
	}
	var failing []string
	for _, r := range items {
		kind, _, _ := unstructured.NestedString(r.Object, "scope", "kind")
		name, _, _ := unstructured.NestedString(r.Object, "scope", "name")
		results, _, _ := unstructured.NestedSlice(r.Object, "results")
		for _, res := range results {
			if m, _ := res.(map[string]any); kind == "Deployment" && m["policy"] == policy && m["result"] == "fail" && !slices.Contains(failing, name) {
				failing = append(failing, name)
			}
		}
	}
	sort.Strings(failing)
	return failing, nil
}

// clusterPolicyGone checks that the cluster has no ClusterPolicy of that name.
func clusterPolicyGone(t *testing.T, cluster, name string) error {
	t.Helper()
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"})
	err := directClient(t, fleetOf(t).Cluster(cluster).Config).Get(testContext(t), client.ObjectKey{Name: name}, cp)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("%s: ClusterPolicy %s still there (%v)", cluster, name, err)
}
