package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/controllers"
)

// Self-approval through a ServiceAccount, as the review found it: a user holding the approver role
// and admin in the tenant's namespace creates a ServiceAccount there, takes a token for it
// (TokenRequest, which admin allows), files an exception as the ServiceAccount and approves it as
// themself. Admission refuses the approval: they may write exceptions in that namespace. And the
// hub counts no approval of a request by a ServiceAccount its admin did not allow
// (--approvable-service-accounts lists another one here): even an independent approver's approval
// leaves it Pending. Nothing reaches any cluster, and the Deployment it would exempt stays denied.
func TestExceptionSelfApprovalThroughServiceAccountRefused(t *testing.T) {
	startHub(t, time.Hour, func(o *controllers.HubOptions) {
		o.ApprovableServiceAccounts = []string{"system:serviceaccount:flux-system:kustomize-controller"}
	})
	ctx := testContext(t)
	const tenant, ns = "team-sa", "exception-sa-e2e"
	fp, latest := deniedScene(ctx, t, tenant, ns, "e2e-exception-sa")
	hub := directClient(t, fleetOf(t).Hub.Config)

	// mallory@corp: the approver role fleet-wide, and admin in the tenant's namespace. The fleet
	// runs no clusterrole aggregation controller, so admin is bound as it would fill it: the roles
	// aggregated to admin and edit, and the tenant role.
	mallory := approverClient(t, "mallory@corp")
	tenantClient(t, tenant, "mallory@corp")
	for _, role := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view"} {
		if err := hub.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "mallory-" + strings.TrimPrefix(role, "system:"), Namespace: tenant},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "mallory@corp"}},
		}); err != nil {
			t.Fatal(err)
		}
	}

	// As mallory: a ServiceAccount that may request exceptions there, and a token for it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "filer", Namespace: tenant}}
	eventually(t, 30*time.Second, 200*time.Millisecond, "mallory's admin binding in effect", func() error {
		return client.IgnoreAlreadyExists(mallory.Create(ctx, sa.DeepCopy()))
	})
	if err := mallory.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "filer-requests", Namespace: tenant},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: applyClusterRole(t, "../config/rbac/tenant/cluster_role.yaml")},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: tenant}},
	}); err != nil {
		t.Fatalf("mallory binds the ServiceAccount: %v", err)
	}
	token := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(600))}}
	if err := mallory.SubResource("token").Create(ctx, sa, token); err != nil {
		t.Fatalf("mallory takes a token for the ServiceAccount: %v", err)
	}
	cfg := rest.AnonymousClientConfig(fleetOf(t).Hub.Config)
	cfg.BearerToken = token.Status.Token
	asSA := directClient(t, cfg)

	manifest := fmt.Sprintf(`
metadata: {name: vendor-agent, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], kinds: [Deployment], names: [web-latest]}
  clusters: {names: [cluster-1, cluster-2]}
  owner: team-sa
  reason: filed by a ServiceAccount its approver controls
  ticket: SEC-9
  expiresAt: %s`, tenant, fp.Name, ns, expiresIn(time.Hour))
	eventually(t, 30*time.Second, 200*time.Millisecond, "the ServiceAccount's binding in effect", func() error {
		probe := &policyhubv1.FleetPolicyException{}
		if err := yaml.Unmarshal([]byte(manifest), probe); err != nil {
			t.Fatal(err)
		}
		return asSA.Create(ctx, probe, client.DryRunAll)
	})
	ex := requestException(t, asSA, manifest)
	const saUser = "system:serviceaccount:" + tenant + ":filer"
	pending := waitException(t, ex, "Pending: not approvable", func(live *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionPending)(live); err != nil {
			return err
		}
		return approvedCondition(policyhubv1.ReasonNotApprovable, "ServiceAccount "+tenant+"/filer requested it")(live)
	})
	if pending.Spec.RequestedBy != saUser {
		t.Fatalf("spec.requestedBy = %q, want %s", pending.Spec.RequestedBy, saUser)
	}

	// mallory approves as themself: refused, nothing stored.
	err := decide(ctx, t, mallory, ex, policyhubv1.DecisionApproved, "mallory@corp")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mallory@corp may create FleetPolicyExceptions in namespace "+tenant) {
		t.Fatalf("mallory's approval: %v, want Forbidden saying they may write exceptions there", err)
	}
	if live := waitException(t, ex, "undecided", exceptionState(policyhubv1.ExceptionPending)); live.Status.Approval != nil {
		t.Fatalf("mallory's refused approval was stored: %+v", live.Status.Approval)
	}

	// An approver who may not write there: admission lets it through, the hub does not count it.
	if err := decide(ctx, t, approverClient(t, "security@corp"), ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("an independent approver's approval: %v", err)
	}
	live := waitException(t, ex, "the approval seen and not counted", func(live *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionPending)(live); err != nil {
			return err
		}
		return approvedCondition(policyhubv1.ReasonNotApprovable, "the approval by security@corp does not count: ServiceAccount "+tenant+"/filer requested it")(live)
	})
	if live.Status.InForce != 0 {
		t.Errorf("in force in %d clusters", live.Status.InForce)
	}
	noExceptionAnywhere(ctx, t)
	err = directClient(t, fleetOf(t).Cluster("cluster-1").Config).Create(ctx, latest.DeepCopy(), client.DryRunAll)
	assertKyvernoDenial(t, "after the refused approvals", err, ns, fp.Name)
}
