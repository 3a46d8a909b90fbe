package e2e

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// `kubectl policyhub convert --fleetpolicy` prints the FleetPolicy with its legacy template turned
// into a ValidatingPolicy: the hub admits it as a new FleetPolicy, syncs it, and cluster-1's
// Kyverno takes the converted policy and enforces it — a Deployment without the team label is
// refused, one with it admitted.
func TestCLIConvertFleetPolicyTemplate(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "cli-convert", "cli-convert-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1"))

	code, out, errOut := syncCheckRun(t, "", "convert", "--fleetpolicy", name)
	if code != app.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "FleetPolicy/"+name+" (ClusterPolicy/"+name+"): converted") {
		t.Errorf("stderr %q: want the FleetPolicy said converted", errOut)
	}
	converted := &policyhubv1.FleetPolicy{}
	if err := yaml.UnmarshalStrict([]byte(out), converted); err != nil {
		t.Fatalf("stdout is not one FleetPolicy: %v\n%s", err, out)
	}
	if tmpl := converted.Spec.Template; tmpl.APIVersion != "policies.kyverno.io/v1" || tmpl.Kind != "ValidatingPolicy" {
		t.Fatalf("converted template %s %s, want policies.kyverno.io/v1 ValidatingPolicy", tmpl.APIVersion, tmpl.Kind)
	}
	if converted.ResourceVersion != "" || converted.UID != "" || len(converted.Finalizers) > 0 || converted.Status.ObservedGeneration != 0 {
		t.Errorf("the printed FleetPolicy carries the hub's identity of the original: %+v", converted.ObjectMeta)
	}
	// The new version, applied as a FleetPolicy of its own, enforcing.
	converted.Name = name + "-cel"
	enforce := policyhubv1.ModeEnforce
	converted.Spec.Mode = &enforce
	data, err := yaml.Marshal(converted)
	if err != nil {
		t.Fatal(err)
	}
	createFleetPolicy(t, string(data))
	waitFleetPolicy(t, converted.Name, "the converted policy in force in cluster-1", allInForce)
	denial := deniedEventually(ctx, t, "cluster-1", shopDeployment(ns, "no-team", ""), "Kyverno enforces the converted policy")
	if !strings.Contains(denial.Error(), name+"-cel") || !strings.Contains(denial.Error(), "Deployments need a team label") {
		t.Errorf("refused, but not by the converted policy with its message: %v", denial)
	}
	if err := c1.Create(ctx, shopDeployment(ns, "with-team", "checkout")); err != nil {
		t.Errorf("a Deployment with the team label refused by the converted policy: %v", err)
	}
}
