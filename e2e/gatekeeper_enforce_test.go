package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Gatekeeper declarations in Enforce: a Rego template (k8srequiredlabels' rule) and a CEL one
// (K8sNativeValidation), each with a Constraint, declared as four FleetPolicies at once. The hub
// ships the templates, waits (Pending) until Gatekeeper serves their Constraint kinds, ships the
// Constraints as deny, and says they are in force once Gatekeeper does; Gatekeeper then refuses a
// Deployment without a team with its own message. A Constraint changed in the cluster and a
// template deleted there (Gatekeeper then deletes its Constraints too) come back; deleting the
// declarations removes Constraints and templates.
func TestGatekeeperEnforceRefusesWithGatekeepersMessage(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "gk-enforce"
	const regoKind, celKind = "E2eEnforceTeam", "E2eEnforceTeamCel"
	cfg := fleetOf(t).Cluster(gatekeeperCluster).Config
	c4 := directClient(t, cfg)
	createNamespace(ctx, t, c4, ns)

	createFleetPolicy(t, gatekeeperRegoTemplate("gk-enforce-rego-template", regoKind))
	createFleetPolicy(t, gatekeeperCELTemplate("gk-enforce-cel-template", celKind))
	createFleetPolicy(t, gatekeeperConstraint("gk-enforce-rego", "Enforce", regoKind, ns))
	createFleetPolicy(t, gatekeeperConstraint("gk-enforce-cel", "Enforce", celKind, ns))
	// After the declarations: cleanups run last first, so this logs before they are deleted.
	logGatekeeperOnFailure(t, regoKind, celKind)
	for _, name := range []string{"gk-enforce-rego-template", "gk-enforce-cel-template", "gk-enforce-rego", "gk-enforce-cel"} {
		waitFleetPolicy(t, name, "synced and in force in "+gatekeeperCluster, allInForce)
	}
	for kind, name := range map[string]string{regoKind: "gk-enforce-rego", celKind: "gk-enforce-cel"} {
		u, err := constraint(ctx, directClient(t, cfg), kind, name)
		if err != nil {
			t.Fatal(err)
		}
		action, _, _ := unstructured.NestedString(u.Object, "spec", "enforcementAction")
		excluded, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "match", "excludedNamespaces")
		if action != "deny" || strings.Join(excluded, ",") != policyhubv1.SyncLeaseNamespace || u.GetLabels()[policyhubv1.LabelManagedBy] == "" {
			t.Errorf("%s %s: enforcementAction %q, excludedNamespaces %v, labels %v: want deny, the hub's namespace, owned", kind, name, action, excluded, u.GetLabels())
		}
	}

	// Gatekeeper refuses, with its own message naming both Constraints.
	refused := c4.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
	for _, want := range []string{`admission webhook "validation.gatekeeper.sh" denied the request`,
		`[gk-enforce-rego] you must provide labels: {"team"}`, `[gk-enforce-cel] CEL: missing required labels, requires all of: team`} {
		if refused == nil || !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), want) {
			t.Fatalf("a Deployment without a team: %v; want refused with %q", refused, want)
		}
	}
	t.Logf("refused: %v", refused)
	if err := c4.Create(ctx, shopDeployment(ns, "web", "checkout"), client.DryRunAll); err != nil {
		t.Errorf("a Deployment with a team: %v", err)
	}

	// Drift: a Constraint switched to dryrun in the cluster is denying again within seconds.
	patch := []byte(`{"spec":{"enforcementAction":"dryrun"}}`)
	regoConstraint := &unstructured.Unstructured{}
	regoConstraint.SetAPIVersion("constraints.gatekeeper.sh/v1beta1")
	regoConstraint.SetKind(regoKind)
	regoConstraint.SetName("gk-enforce-rego")
	if err := directClient(t, cfg).Patch(ctx, regoConstraint, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the Constraint's enforcementAction restored", func() error {
		u, err := constraint(ctx, directClient(t, cfg), regoKind, "gk-enforce-rego")
		if err != nil {
			return err
		}
		if action, _, _ := unstructured.NestedString(u.Object, "spec", "enforcementAction"); action != "deny" {
			return fmt.Errorf("enforcementAction %q", action)
		}
		return nil
	})

	// Drift: the CEL template deleted in the cluster; Gatekeeper deletes its Constraint kind, and
	// with it the Constraint. Both come back, the Constraint once Gatekeeper serves its kind again.
	template, err := constraintTemplate(ctx, c4, strings.ToLower(celKind))
	if err != nil {
		t.Fatal(err)
	}
	if err := c4.Delete(ctx, template); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, 500*time.Millisecond, "the template and its Constraint restored, refusing again", func() error {
		if _, err := constraintTemplate(ctx, c4, strings.ToLower(celKind)); err != nil {
			return fmt.Errorf("template: %w", err)
		}
		if _, err := constraint(ctx, directClient(t, cfg), celKind, "gk-enforce-cel"); err != nil {
			return fmt.Errorf("constraint: %w", err)
		}
		err := c4.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "[gk-enforce-cel] CEL: missing required labels") {
			return fmt.Errorf("a Deployment without a team: %v", err)
		}
		return nil
	})
	waitFleetPolicy(t, "gk-enforce-cel", "in force again", allInForce)

	// Prune: the declarations go, and so do Constraints and templates.
	for _, name := range []string{"gk-enforce-rego", "gk-enforce-cel", "gk-enforce-rego-template", "gk-enforce-cel-template"} {
		deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, kind := range []string{regoKind, celKind} {
		if _, err := constraintTemplate(context.Background(), c4, strings.ToLower(kind)); !apierrors.IsNotFound(err) {
			t.Errorf("template %s still in %s after its declaration was deleted (%v)", strings.ToLower(kind), gatekeeperCluster, err)
		}
	}
	eventually(t, 30*time.Second, 500*time.Millisecond, "a Deployment without a team admitted once the declarations went", func() error {
		return c4.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
	})
}
