package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A change of the spec by someone other than the requester does not make them the requester,
// nor let them approve. lead@team-w, an approver who may also write the team's exceptions for a
// while, widens a colleague's request: the first requester stays, lead is listed in
// spec.changedBy, and whatever lead writes keeps both so. Once lead's write
// rights are gone, lead's approval is still refused, nothing is stored, nothing reaches a
// cluster, Kyverno keeps denying; another approver's approval of the same spec counts.
func TestExceptionSpecWriterCannotApprove(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, ns = "team-w", "exception-writers-e2e"
	fp, latest := deniedScene(ctx, t, tenant, ns, "e2e-exception-writers")
	hub := directClient(t, fleetOf(t).Hub.Config)

	dev := tenantClient(t, tenant, "dev@team-w")
	ex := requestException(t, dev, fmt.Sprintf(`
metadata: {name: vendor-agent, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], kinds: [Deployment], names: [other]}
  clusters: {names: [cluster-1]}
  owner: team-w
  reason: a colleague's request
  ticket: SEC-5
  expiresAt: %s`, tenant, fp.Name, ns, expiresIn(time.Hour)))

	lead := approverClient(t, "lead@team-w")
	tenantClient(t, tenant, "lead@team-w") // write rights, for now
	live := &policyhubv1.FleetPolicyException{}
	// update changes the exception as c's user, read afresh (the hub writes it too).
	update := func(c client.Client, change func(*policyhubv1.FleetPolicyException)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), live); err != nil {
				t.Fatal(err)
			}
			change(live)
			return c.Update(ctx, live)
		})
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "lead widens the request", func() error {
		return update(lead, func(e *policyhubv1.FleetPolicyException) { e.Spec.Resources.Names = []string{"web-latest"} })
	})
	if live.Spec.RequestedBy != "dev@team-w" || !slices.Equal(live.Spec.ChangedBy, []string{"lead@team-w"}) {
		t.Fatalf("after lead's change: requestedBy %q, changedBy %v; want dev@team-w and [lead@team-w]", live.Spec.RequestedBy, live.Spec.ChangedBy)
	}
	// The requester's own change lists nobody new.
	if err := update(dev, func(e *policyhubv1.FleetPolicyException) { e.Spec.Reason = "a colleague's request, widened" }); err != nil {
		t.Fatalf("dev's change: %v", err)
	}
	if live.Spec.RequestedBy != "dev@team-w" || !slices.Equal(live.Spec.ChangedBy, []string{"lead@team-w"}) {
		t.Fatalf("after dev's change: requestedBy %q, changedBy %v", live.Spec.RequestedBy, live.Spec.ChangedBy)
	}
	// Whatever lead writes there, the first requester stays and lead stays listed: the stamp puts
	// them back (without it admission refuses: TestExceptionRequesterCheckedWithoutStamp).
	for what, change := range map[string]func(*policyhubv1.FleetPolicyException){
		"lead leaves spec.changedBy":    func(e *policyhubv1.FleetPolicyException) { e.Spec.ChangedBy = nil; e.Spec.Ticket = "SEC-6" },
		"lead renames the requester":    func(e *policyhubv1.FleetPolicyException) { e.Spec.RequestedBy = "lead@team-w" },
		"lead lists someone else first": func(e *policyhubv1.FleetPolicyException) { e.Spec.ChangedBy = []string{"someone@corp"} },
	} {
		_ = update(lead, change)
		if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), live); err != nil || live.Spec.RequestedBy != "dev@team-w" || !slices.Equal(live.Spec.ChangedBy, []string{"lead@team-w"}) {
			t.Errorf("%s: %v; requestedBy %q, changedBy %v", what, err, live.Spec.RequestedBy, live.Spec.ChangedBy)
		}
	}

	// lead's write rights go; lead is still a writer of this spec.
	if err := hub.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-lead@team-w", Namespace: tenant}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "lead's write rights gone", func() error {
		if err := update(lead, func(e *policyhubv1.FleetPolicyException) { e.Spec.Owner = "probe" }); !apierrors.IsForbidden(err) {
			return fmt.Errorf("lead's update: %v", err)
		}
		return nil
	})
	err := decide(ctx, t, lead, ex, policyhubv1.DecisionApproved, "lead@team-w")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "whoever changed the exception's spec (spec.changedBy) cannot approve, deny or revoke it") {
		t.Fatalf("lead's approval: %v, want Forbidden naming spec.changedBy", err)
	}
	pending := waitException(t, ex, "Pending", exceptionState(policyhubv1.ExceptionPending))
	if pending.Status.Approval != nil {
		t.Fatalf("lead's refused approval was stored: %+v", pending.Status.Approval)
	}
	noExceptionAnywhere(ctx, t)
	err = directClient(t, fleetOf(t).Cluster("cluster-1").Config).Create(ctx, latest.DeepCopy(), client.DryRunAll)
	assertKyvernoDenial(t, "after lead's refused approval", err, ns, fp.Name)

	if err := decide(ctx, t, approverClient(t, "security@corp"), ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("another approver's approval: %v", err)
	}
	waitException(t, ex, "Active", exceptionState(policyhubv1.ExceptionActive))
	admittedEventually(ctx, t, "cluster-1", latest, "admitted once another approver approved")
}

// Where the hub does not serve MutatingAdmissionPolicy (Kubernetes 1.30–1.35) nothing stamps the
// requester: the fence checks what the writer says instead. With the fleet's stamping policy
// unbound, as on such a hub: a request that does not name its writer as requester, or names
// someone else, is refused; naming itself it is created (kubectl policyhub names the user); another
// writer must list itself in spec.changedBy, and only itself. The hub counts the fence in place
// (the stamp is not part of it).
func TestExceptionRequesterCheckedWithoutStamp(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant = "team-nostamp"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	dev := tenantClient(t, tenant, "dev@team-nostamp")
	peer := tenantClient(t, tenant, "peer@team-nostamp")
	request := func(name, requestedBy string) *policyhubv1.FleetPolicyException {
		return &policyhubv1.FleetPolicyException{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
			Spec: policyhubv1.FleetPolicyExceptionSpec{
				Target:    policyhubv1.ExceptionTarget{Kind: policyhubv1.KindFleetPolicy, Name: "any"},
				Resources: policyhubv1.ExceptionResources{Namespaces: []string{tenant}},
				Clusters:  policyhubv1.ExceptionClusters{Names: []string{"cluster-1"}},
				Owner:     "team-nostamp", Reason: "checking the requester", Ticket: "SEC-8",
				ExpiresAt:   metav1.NewTime(time.Now().Add(time.Hour)),
				RequestedBy: requestedBy,
			},
		}
	}
	restore := withoutBinding(t, "MutatingAdmissionPolicyBinding", "policyhub-exception-requester")
	eventually(t, 30*time.Second, 200*time.Millisecond, "the stamp out of effect", func() error {
		err := dev.Create(ctx, request("probe", ""), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.requestedBy must be you (dev@team-nostamp): whoever creates an exception is its requester") {
			return fmt.Errorf("a request naming nobody: %v", err)
		}
		return nil
	})
	if err := dev.Create(ctx, request("probe", "security@corp"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.requestedBy must be you (dev@team-nostamp)") {
		t.Errorf("a request in someone else's name: %v", err)
	}
	code, out, errOut := cliReadRun(t, "--as", "dev@team-nostamp", "exception", "request", "by-cli", "-n", tenant, "--policy", "any",
		"--namespaces", tenant, "--clusters", "cluster-1", "--owner", "team-nostamp", "--reason", "r", "--ticket", "T-1", "--expires-in", "1h")
	if code != 0 || !strings.Contains(out, "requested by dev@team-nostamp (generation 1)") {
		t.Errorf("kubectl policyhub exception request without the stamp: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() {
		_ = hub.Delete(context.Background(), &policyhubv1.FleetPolicyException{ObjectMeta: metav1.ObjectMeta{Name: "by-cli", Namespace: tenant}})
	})
	ex := requestException(t, dev, string(marshalJSON(request("own", "dev@team-nostamp"))))

	live := &policyhubv1.FleetPolicyException{}
	change := func(changedBy ...string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := hub.Get(ctx, client.ObjectKeyFromObject(ex), live); err != nil {
				t.Fatal(err)
			}
			live.Spec.Reason += "!"
			live.Spec.ChangedBy = changedBy
			return peer.Update(ctx, live)
		})
	}
	if err := change(); err == nil || !strings.Contains(err.Error(), "spec.changedBy must be [peer@team-nostamp]") {
		t.Errorf("another writer's change without listing itself: %v", err)
	}
	if err := change("someone@corp"); err == nil || !strings.Contains(err.Error(), "spec.changedBy must be [peer@team-nostamp]") {
		t.Errorf("another writer's change listing someone else: %v", err)
	}
	if err := change("peer@team-nostamp"); err != nil {
		t.Fatalf("another writer's change listing itself: %v", err)
	}
	waitException(t, ex, "Pending, the fence in place without the stamp", func(live *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionPending)(live); err != nil {
			return err
		}
		return approvedCondition(policyhubv1.ExceptionPending, "requested by dev@team-nostamp; awaiting approval")(live)
	})

	restore()
	eventually(t, 30*time.Second, 200*time.Millisecond, "the stamp back in effect", func() error {
		probe := request("probe", "")
		if err := dev.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Spec.RequestedBy != "dev@team-nostamp" {
			return fmt.Errorf("requestedBy %q", probe.Spec.RequestedBy)
		}
		return nil
	})
}
