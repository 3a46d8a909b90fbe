package e2e

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// An agent's hub identity writes its own liveness Lease and no other: not another cluster's,
// not another Lease in its namespace (a hub replica's or a tool's), and it cannot list or delete
// Leases. Each refusal is checked to have written nothing.
func TestAgentIdentityWritesOnlyItsOwnLease(t *testing.T) {
	ctx := testContext(t)
	agentHubConfig(t, "cluster-2") // cluster-2's namespace and identity exist too
	agent1, err := client.New(agentHubConfig(t, "cluster-1"), client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	admin := directClient(t, fleetOf(t).Hub.Config)
	lease := func(namespace, name string) *coordinationv1ac.LeaseApplyConfiguration {
		return coordinationv1ac.Lease(name, namespace).WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("cluster-1").WithRenewTime(metav1.NowMicro()))
	}
	apply := func(l *coordinationv1ac.LeaseApplyConfiguration) error {
		return agent1.Apply(ctx, l, client.FieldOwner("policyhub-agent"), client.ForceOwnership)
	}
	t.Cleanup(func() {
		for _, key := range []client.ObjectKey{{Namespace: "cluster-1", Name: policyhubv1.AgentLeaseName}, {Namespace: "cluster-1", Name: "someone-elses"}, {Namespace: "cluster-2", Name: policyhubv1.AgentLeaseName}} {
			_ = admin.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		}
	})

	// Its own: created by apply, renewed by a patch of renewTime.
	if err := apply(lease("cluster-1", policyhubv1.AgentLeaseName)); err != nil {
		t.Fatalf("cluster-1's agent applying its own Lease: %v", err)
	}
	own := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-1", Name: policyhubv1.AgentLeaseName}}
	if err := agent1.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"renewTime":"2026-11-24T00:00:00.000000Z"}}`))); err != nil {
		t.Errorf("cluster-1's agent renewing its own Lease by patch: %v", err)
	}

	// Another cluster's, and another Lease in its own namespace: refused, and nothing written.
	for _, target := range []client.ObjectKey{{Namespace: "cluster-2", Name: policyhubv1.AgentLeaseName}, {Namespace: "cluster-1", Name: "someone-elses"}} {
		if err := apply(lease(target.Namespace, target.Name)); !apierrors.IsForbidden(err) {
			t.Errorf("cluster-1's agent applying Lease %s: got %v, want Forbidden", target, err)
		}
		if err := admin.Get(ctx, target, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease %s after the refused apply: got %v, want NotFound (nothing written)", target, err)
		}
	}
	// Taking over a Lease someone else holds in its namespace: refused, the holder unchanged.
	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-1", Name: "someone-elses"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("someone")}}
	if err := admin.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"holderIdentity":"cluster-1"}}`))
	if err := agent1.Patch(ctx, held.DeepCopy(), patch); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-1's agent patching another Lease in its namespace: got %v, want Forbidden", err)
	}
	after := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(held), after); err != nil || after.Spec.HolderIdentity == nil || *after.Spec.HolderIdentity != "someone" {
		t.Errorf("the other Lease after the refused patch: %+v, %v; want still held by someone", after.Spec, err)
	}
	if err := agent1.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace("cluster-1")); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-1's agent listing Leases: got %v, want Forbidden", err)
	}
	if err := agent1.Delete(ctx, own.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-1's agent deleting its Lease: got %v, want Forbidden", err)
	}
}
