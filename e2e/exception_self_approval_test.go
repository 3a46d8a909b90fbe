package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Admission guards an exception's approval beyond RBAC (config/admission/exceptions.yaml on the
// real hub apiserver): whoever requested it cannot decide on it even with every right (an admin);
// the right to write the status is not enough without verb approve; a decision must name its
// writer and the generation it decides on. Each refusal leaves the stored exception as it was,
// and a user may not pass off someone else as the requester.
func TestExceptionSelfApprovalRefused(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const ns = "exception-self-e2e"
	createNamespace(ctx, t, hub, ns)

	// The requester is a user with every right on exceptions, approve included.
	const requester = "lead@corp"
	grantAll := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-exception-everything"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"policyhub.io"}, Resources: []string{"fleetpolicyexceptions", "fleetpolicyexceptions/status"}, Verbs: []string{"*"}}},
	}
	statusOnly := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-exception-status-writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"policyhub.io"}, Resources: []string{"fleetpolicyexceptions/status"}, Verbs: []string{"get", "patch", "update"}}},
	}
	for _, b := range []struct {
		role *rbacv1.ClusterRole
		user string
	}{{grantAll, requester}, {statusOnly, "writer@corp"}} {
		if err := hub.Create(ctx, b.role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.role.Name, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: b.user}},
		}
		if err := hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hub.Delete(context.Background(), b.role) })
	}
	lead := impersonating(t, requester)
	approver := approverClient(t, "security@corp")

	ex := &policyhubv1.FleetPolicyException{
		ObjectMeta: metav1.ObjectMeta{Name: "own-request", Namespace: ns},
		Spec: policyhubv1.FleetPolicyExceptionSpec{
			Target:    policyhubv1.ExceptionTarget{Kind: policyhubv1.KindFleetPolicy, Name: "any"},
			Resources: policyhubv1.ExceptionResources{Namespaces: []string{"shop"}},
			Clusters:  policyhubv1.ExceptionClusters{Names: []string{"cluster-1"}},
			Owner:     "platform", Reason: "testing the fence", Ticket: "SEC-1",
			ExpiresAt:   metav1.NewTime(time.Now().Add(time.Hour)),
			RequestedBy: "someone-else@corp", // replaced by the server
		},
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the requester's RoleBinding in effect", func() error {
		return lead.Create(ctx, ex.DeepCopy())
	})
	t.Cleanup(func() { _ = hub.Delete(context.Background(), ex) })
	stored := &policyhubv1.FleetPolicyException{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.RequestedBy != requester {
		t.Fatalf("spec.requestedBy = %q, want the requesting user %s, whatever the request said", stored.Spec.RequestedBy, requester)
	}

	refused := func(what string, c client.Client, decision, by string, generation int64, want string) {
		t.Helper()
		err := decideOn(ctx, c, stored, decision, by, generation)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", what, err, want)
		}
	}
	refused("the requester approving their own request", lead, policyhubv1.DecisionApproved, requester, stored.Generation,
		"the requester of an exception (spec.requestedBy) cannot approve, deny or revoke it")
	refused("the requester revoking their own request", lead, policyhubv1.DecisionRevoked, requester, stored.Generation, "cannot approve, deny or revoke it")
	refused("a status writer without verb approve", impersonating(t, "writer@corp"), policyhubv1.DecisionApproved, "writer@corp", stored.Generation,
		"needs verb approve on fleetpolicyexceptions")
	refused("an approval in someone else's name", approver, policyhubv1.DecisionApproved, "ciso@corp", stored.Generation,
		"status.approval.by must be the user deciding (security@corp)")
	refused("an approval of another generation", approver, policyhubv1.DecisionApproved, "security@corp", stored.Generation+1,
		fmt.Sprintf("status.approval.generation must be the generation decided on, the current one: %d", stored.Generation))

	after := &policyhubv1.FleetPolicyException{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), after); err != nil {
		t.Fatal(err)
	}
	if after.Status.Approval != nil || after.ResourceVersion != stored.ResourceVersion {
		t.Fatalf("a refused decision changed the exception: approval %+v, resourceVersion %s → %s", after.Status.Approval, stored.ResourceVersion, after.ResourceVersion)
	}

	// Another user with the right may decide; a spec change by the requester afterwards keeps the
	// requester and lists nobody as another writer of the spec.
	if err := decideOn(ctx, approver, stored, policyhubv1.DecisionApproved, "security@corp", stored.Generation); err != nil {
		t.Fatalf("an approver's approval: %v", err)
	}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), after); err != nil {
		t.Fatal(err)
	}
	if a := after.Status.Approval; a == nil || a.By != "security@corp" || a.Decision != policyhubv1.DecisionApproved {
		t.Fatalf("status.approval = %+v", a)
	}
	after.Spec.Reason = "testing the fence, wider"
	if err := lead.Update(ctx, after); err != nil {
		t.Fatalf("the requester's spec change: %v", err)
	}
	if after.Spec.RequestedBy != requester || len(after.Spec.ChangedBy) != 0 || after.Generation != stored.Generation+1 {
		t.Fatalf("after the spec change: requestedBy %q, changedBy %v, generation %d", after.Spec.RequestedBy, after.Spec.ChangedBy, after.Generation)
	}
}
