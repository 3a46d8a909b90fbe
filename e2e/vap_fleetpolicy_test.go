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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A FleetPolicy carrying a Kubernetes ValidatingAdmissionPolicy: the hub ships it with a binding
// of its own; in Enforce the cluster's API server itself refuses a violating Deployment (its own
// message), in Audit admits it; a binding deleted in the cluster is restored; deleting the
// FleetPolicy removes policy and binding.
func TestValidatingAdmissionPolicyFleetPolicyEnforcesThroughTheAPIServer(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "vap-team", "vap-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createFleetPolicy(t, vapTeamPolicy(name, "Enforce", "cluster-1", ns))
	waitFleetPolicy(t, name, "synced in cluster-1", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	binding := &unstructured.Unstructured{}
	binding.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"})
	actions := func() ([]string, error) {
		if err := c1.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil {
			return nil, err
		}
		a, _, err := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions")
		return a, err
	}
	if a, err := actions(); err != nil || strings.Join(a, ",") != "Deny" || binding.GetLabels()[policyhubv1.LabelManagedBy] == "" {
		t.Fatalf("binding %s in cluster-1: actions %v (%v), labels %v: want Deny, owned", name, a, err, binding.GetLabels())
	}
	eventually(t, 30*time.Second, 500*time.Millisecond, "the API server refuses a Deployment without a team", func() error {
		err := c1.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("admitted")
		}
		if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+name+"' with binding '"+name+"' denied request") || !strings.Contains(err.Error(), "Deployments need a team label") {
			return fmt.Errorf("refused without the API server's message: %v", err)
		}
		return nil
	})
	if err := c1.Create(ctx, shopDeployment(ns, "api", "checkout"), client.DryRunAll); err != nil {
		t.Errorf("a Deployment with a team was refused: %v", err)
	}

	// Drift: the binding deleted in the cluster comes back.
	if err := c1.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the binding restored", func() error {
		a, err := actions()
		if err != nil || strings.Join(a, ",") != "Deny" {
			return fmt.Errorf("actions %v (%v)", a, err)
		}
		return nil
	})

	// Audit: the binding audits and warns; the API server admits.
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { audit := policyhubv1.ModeAudit; fp.Spec.Mode = &audit })
	eventually(t, 30*time.Second, 500*time.Millisecond, "Audit: the Deployment admitted", func() error {
		if a, err := actions(); err != nil || strings.Join(a, ",") != "Audit,Warn" {
			return fmt.Errorf("actions %v (%v)", a, err)
		}
		return c1.Create(ctx, shopDeployment(ns, "web", ""), client.DryRunAll)
	})

	deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	policy := &unstructured.Unstructured{}
	policy.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"})
	for _, obj := range []*unstructured.Unstructured{policy, binding} {
		if err := c1.Get(context.Background(), client.ObjectKey{Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s still in cluster-1 after the FleetPolicy was deleted (%v)", obj.GetKind(), name, err)
		}
	}
}
