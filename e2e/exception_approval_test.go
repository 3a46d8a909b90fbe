package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

// A tenant's exception is inert until someone else approves it: requested by a tenant identity
// (spec.requestedBy stamped by the server), it stays Pending and no PolicyException is in any
// cluster, where Kyverno keeps denying the workload; the tenant's own approval is refused by RBAC.
// Approved by a security team identity, it becomes a kyverno.io/v2 PolicyException in the
// listed cluster only: the workload is admitted there, and still denied in the other.
func TestExceptionInertUntilApprovedByAnother(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, tenant = "exception-approval-e2e", "team-exc"
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), ns)
	}
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	grantTenant(ctx, t, tenant, ns)
	fp := enforcedLatestTag(t, "e2e-exception-approval", ns)
	latest := deployment(ns, "web-latest", "nginx:latest")
	assertKyvernoDenial(t, "before any exception", deniedEventually(ctx, t, "cluster-1", latest, "denied in cluster-1"), ns, fp.Name)

	requester := tenantClient(t, tenant, "dev@team-exc")
	approver := approverClient(t, "security@corp")
	ex := requestException(t, requester, fmt.Sprintf(`
metadata: {name: vendor-agent, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], kinds: [Deployment], names: [web-latest]}
  clusters: {names: [cluster-1]}
  owner: team-exc
  reason: the vendor's agent is only published as latest until its 2.0
  ticket: SEC-1234
  expiresAt: %s`, tenant, fp.Name, ns, expiresIn(time.Hour)))

	pending := waitException(t, ex, "Pending", exceptionState(policyhubv1.ExceptionPending))
	if pending.Spec.RequestedBy != "dev@team-exc" {
		t.Errorf("spec.requestedBy = %q, want the requesting user dev@team-exc (stamped by admission)", pending.Spec.RequestedBy)
	}
	for _, c := range []string{"cluster-1", "cluster-2"} {
		if got := kyvernoExceptions(ctx, t, c, "kyverno.io/v2"); len(got) != 0 {
			t.Errorf("%s holds PolicyExceptions %v while the exception awaits approval", c, keysOf(got))
		}
	}
	if err := directClient(t, fleetOf(t).Cluster("cluster-1").Config).Create(ctx, latest.DeepCopy(), client.DryRunAll); err == nil {
		t.Errorf("a Pending exception let the Deployment in")
	}

	// The requester cannot approve: no right on the status subresource.
	err := decide(ctx, t, requester, ex, policyhubv1.DecisionApproved, "dev@team-exc")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the requester's own approval: %v, want Forbidden by RBAC", err)
	}
	if live := waitException(t, ex, "still undecided", exceptionState(policyhubv1.ExceptionPending)); live.Status.Approval != nil {
		t.Fatalf("the refused approval was stored: %+v", live.Status.Approval)
	}

	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("the approver's approval: %v", err)
	}
	active := waitException(t, ex, "Active in cluster-1", func(ex *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(ex); err != nil {
			return err
		}
		if ex.Status.InForce != 1 {
			return fmt.Errorf("inForce %d, want 1", ex.Status.InForce)
		}
		return nil
	})
	if want := "ClusterPolicy/" + fp.Name; active.Status.Policy != want {
		t.Errorf("status.policy = %q, want %q", active.Status.Policy, want)
	}
	name := policyhubv1.ExceptionObjectName(tenant, ex.Name)
	in1 := kyvernoExceptions(ctx, t, "cluster-1", "kyverno.io/v2")[name]
	if in1 == nil {
		t.Fatalf("no PolicyException %s in cluster-1", name)
	}
	if got := in1.GetAnnotations()[render.AnnotationExceptionApprovedBy]; got != "security@corp" {
		t.Errorf("the PolicyException's approved-by annotation = %q", got)
	}
	if got := fmt.Sprint(in1.Object["spec"]); !strings.Contains(got, "namespaces:["+ns+"]") || !strings.Contains(got, "policyName:"+fp.Name) {
		t.Errorf("the PolicyException's spec is %s", got)
	}
	if got := kyvernoExceptions(ctx, t, "cluster-2", "kyverno.io/v2"); len(got) != 0 {
		t.Errorf("cluster-2, not listed, holds PolicyExceptions %v", keysOf(got))
	}
	admittedEventually(ctx, t, "cluster-1", latest, "the excepted Deployment admitted in cluster-1")
	err = directClient(t, fleetOf(t).Cluster("cluster-2").Config).Create(ctx, latest.DeepCopy(), client.DryRunAll)
	assertKyvernoDenial(t, "cluster-2, not listed", err, ns, fp.Name)
	// Who asked and who approved are in the exception's Events, as the hub saw each state.
	eventually(t, 30*time.Second, 200*time.Millisecond, "Pending and Active Events naming the requester and the approver", func() error {
		list := &eventsv1.EventList{}
		if err := hub.List(ctx, list, client.InNamespace(tenant)); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			if e.Regarding.Kind == policyhubv1.KindFleetPolicyException && e.Regarding.Name == ex.Name {
				seen[e.Reason+": "+e.Note] = true
			}
		}
		for _, want := range []string{"Pending: requested by dev@team-exc; awaiting approval", "Active: approved by security@corp"} {
			found := false
			for note := range seen {
				found = found || strings.HasPrefix(note, want)
			}
			if !found {
				return fmt.Errorf("no Event %q among %v", want, keysOf(seen))
			}
		}
		return nil
	})
	other := deployment(ns, "web-latest", "nginx:latest")
	other.Name = "other-latest"
	if err := directClient(t, fleetOf(t).Cluster("cluster-1").Config).Create(ctx, other, client.DryRunAll); err == nil {
		t.Errorf("a Deployment the exception does not name was admitted in cluster-1")
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
