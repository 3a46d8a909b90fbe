package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A deliberately wrong conversion of disallow-latest-tag (one negation dropped: it forbids
// every tag but latest) never swaps: its shadow judges the fleet's Deployments differently from
// the legacy policy, the differing ones are named with both verdicts, staging stays Pending
// with the count, and the legacy ClusterPolicy keeps running (and refusing :latest) in both
// clusters.
func TestSwapOfAWrongConversionNeverHappens(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "swap-wrong", "swap-wrong-latest-tag"
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		c := directClient(t, fleetOf(t).Cluster(cluster).Config)
		createNamespace(ctx, t, c, ns)
		for _, image := range map[string]string{"pinned": "nginx:1.27", "latest": "nginx:latest"} {
			if err := c.Create(ctx, podDeployment(ns, strings.NewReplacer(":", "-", ".", "-").Replace(image), image, true, true)); err != nil {
				t.Fatal(err)
			}
		}
	}
	legacy := bestPractice(t, "disallow-latest-tag", name, ns)
	createSwappable(t, name, legacy, 0)

	wrong := converted(t, legacy)
	validations, _, _ := unstructured.NestedSlice(wrong.Object, "spec", "validations")
	for i, v := range validations {
		m := v.(map[string]any)
		expr := m["expression"].(string)
		if changed := strings.ReplaceAll(expr, "!(element.image.endsWith(':latest'))", "(element.image.endsWith(':latest'))"); changed != expr {
			m["expression"] = changed
			validations[i] = m
		}
	}
	if err := unstructured.SetNestedSlice(wrong.Object, validations, "spec", "validations"); err != nil {
		t.Fatal(err)
	}
	swapTo(t, name, wrong)

	fp := waitResults(t, name, "staging held on the differences, both named", func(fp *fleetView) error {
		w := wave(fp, "staging")
		if w.Phase != policyhubv1.WavePending || !strings.Contains(w.Reason, "differently from the running one, at most 0 accepted; not swapped") {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		p := fp.Status.Preview
		if p == nil || p.Differ < 4 || len(p.FirstDiffering) < 4 {
			return fmt.Errorf("preview %+v", p)
		}
		return nil
	})
	named := map[string]string{}
	for _, d := range fp.Status.Preview.FirstDiffering {
		named[d.Cluster+"/"+d.Resource.Name] = string(d.Shadow) + "/" + string(d.Live)
	}
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		if got := named[cluster+"/nginx-1-27"]; got != "fail/pass" {
			t.Errorf("%s: the pinned Deployment is named %q, want fail/pass (candidate/running)", cluster, got)
		}
		if got := named[cluster+"/nginx-latest"]; got != "pass/fail" {
			t.Errorf("%s: the latest Deployment is named %q, want pass/fail", cluster, got)
		}
	}
	holds(t, 5*time.Second, "the wrong conversion is not swapped in", func() error {
		if w := wave(readFleetPolicy(t, name), "staging"); w.Phase != policyhubv1.WavePending {
			return fmt.Errorf("staging %s", w.Phase)
		}
		for _, cluster := range []string{"cluster-1", "cluster-2"} {
			if policyIn(t, cluster, clusterPolicyGVK, name) == nil {
				return fmt.Errorf("%s lost the legacy ClusterPolicy", cluster)
			}
			if policyIn(t, cluster, validatingPolicyGVK, name) != nil {
				return fmt.Errorf("%s got the wrong ValidatingPolicy", cluster)
			}
		}
		return nil
	})
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		waitRefusedDeployment(t, cluster, name, podDeployment(ns, "new-latest", "nginx:latest", true, true))
	}
}
