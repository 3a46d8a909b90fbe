package e2e

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// Every managed cluster says which Kyverno it runs as a real one does: Kyverno's Helm chart's
// Deployments in namespace kyverno, whose Kyverno container's image tag is the version running
// (1.19 or 1.16) and whose args are the flags the processes run with. SayKyvernoVersion makes a
// cluster say another version, and its restore puts the real one back.
func TestFleetKyvernoDeploymentsSayTheRunningVersion(t *testing.T) {
	ctx := testContext(t)
	images := func(c client.Client) (map[string]string, error) {
		out := map[string]string{}
		for _, name := range []string{fleet.KyvernoAdmissionDeployment, fleet.KyvernoReportsDeployment} {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: fleet.KyvernoNamespace, Name: name}, d); err != nil {
				return nil, err
			}
			if d.Labels["app.kubernetes.io/part-of"] != "kyverno" || d.Spec.Selector.MatchLabels["app.kubernetes.io/component"] == "" {
				return nil, fmt.Errorf("Deployment %s labels %v, selector %v: not the chart's", name, d.Labels, d.Spec.Selector)
			}
			args := d.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--enablePolicyException=true") || !slices.Contains(args, "--exceptionNamespace=policyhub-system") {
				return nil, fmt.Errorf("Deployment %s args %v: not the flags Kyverno runs with", name, args)
			}
			out[name] = d.Spec.Template.Spec.Containers[0].Image
		}
		return out, nil
	}
	want := func(version string) map[string]string {
		return map[string]string{
			fleet.KyvernoAdmissionDeployment: "reg.kyverno.io/kyverno/kyverno:" + version,
			fleet.KyvernoReportsDeployment:   "reg.kyverno.io/kyverno/reports-controller:" + version,
		}
	}
	for _, name := range []string{"cluster-1", kyverno116Cluster} {
		cluster := fleetOf(t).Cluster(name)
		c := directClient(t, cluster.Config)
		running := map[string]string{"cluster-1": fleet.KyvernoVersion, kyverno116Cluster: fleet.Kyverno116Version}[name]
		if got, err := images(c); err != nil || fmt.Sprint(got) != fmt.Sprint(want(running)) {
			t.Fatalf("%s: images %v (%v), want %v", name, got, err, want(running))
		}
		restore, err := cluster.SayKyvernoVersion(ctx, "v1.20.0")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := images(c); err != nil || fmt.Sprint(got) != fmt.Sprint(want("v1.20.0")) {
			t.Errorf("%s says v1.20.0: images %v (%v)", name, got, err)
		}
		if err := restore(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := images(c); err != nil || fmt.Sprint(got) != fmt.Sprint(want(running)) {
			t.Errorf("%s restored: images %v (%v), want %v", name, got, err, want(running))
		}
	}
}
