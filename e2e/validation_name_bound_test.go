package e2e

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The longest policy name Kyverno takes is the longest a FleetPolicy's policy may get: a name
// one character longer is refused by Kyverno in the cluster and, for the FleetPolicy whose policy
// would carry it, at admission on the hub, with a message naming the field.
func TestFleetPolicyNameKyvernoWouldRefuseIsRefused(t *testing.T) {
	ctx := testContext(t)
	longest := strings.Repeat("n", 63)
	tooLong := longest + "n"

	// Kyverno's own bound, in a real cluster (dry-run: nothing persists).
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	for name, refused := range map[string]bool{longest: false, tooLong: true} {
		policy := latestTagPolicy(t, name, "default", "Audit")
		err := cluster.Create(ctx, policy, client.DryRunAll)
		if refused != (err != nil) {
			t.Fatalf("Kyverno, ClusterPolicy named %d characters: %v (want refused: %v)", len(name), err, refused)
		}
		if err != nil {
			t.Logf("Kyverno refuses a %d-character name: %v", len(name), err)
		}
	}

	hub := directClient(t, fleetOf(t).Hub.Config)
	fleetPolicy := func(name, templateName string) *policyhubv1.FleetPolicy {
		fp := &policyhubv1.FleetPolicy{}
		meta := ""
		if templateName != "" {
			meta = "\n    metadata: {name: " + templateName + "}"
		}
		if err := yaml.Unmarshal([]byte(`
metadata: {name: `+name+`}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy`+meta+`
    spec: `+indentedSpec("name-bound")), fp); err != nil {
			t.Fatal(err)
		}
		return fp
	}
	for _, c := range []struct {
		what, name, templateName, want string
	}{
		{"a name Kyverno would refuse", tooLong, "", "metadata.name"},
		{"a template name Kyverno would refuse", "e2e-name-bound", tooLong, "template.metadata.name"},
	} {
		err := hub.Create(ctx, fleetPolicy(c.name, c.templateName), client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "63") {
			t.Errorf("%s: %v; want refused at admission, naming %s and the bound", c.what, err, c.want)
		}
	}
	// Characters the clusters refuse in a name are refused too, naming the field.
	err := hub.Create(ctx, fleetPolicy("e2e-name-chars", "Require_Labels"), client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "template.metadata.name must be lowercase") {
		t.Errorf("a template name with '_' and capitals: %v; want refused at admission, naming template.metadata.name", err)
	}
	if err := hub.Create(ctx, fleetPolicy("e2e-name-chars", "require.labels-v2"), client.DryRunAll); err != nil {
		t.Errorf("a template name with '.' and '-': %v", err)
	}
	// A long FleetPolicy name is fine when the template names the policy.
	if err := hub.Create(ctx, fleetPolicy(tooLong, "short"), client.DryRunAll); err != nil {
		t.Errorf("a long name with a template name: %v", err)
	}
	if err := hub.Create(ctx, fleetPolicy(longest, ""), client.DryRunAll); err != nil {
		t.Errorf("a 63-character name: %v", err)
	}
}
