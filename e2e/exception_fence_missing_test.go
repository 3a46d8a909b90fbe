package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// No approval counts without the admission fence. With the approval policy's binding removed, an
// approval is stored unchecked; the hub keeps the exception Pending, its Approved condition
// FenceMissing naming what is missing, and marks that approval (status.uncheckedApproval): nothing
// reaches any cluster, Kyverno keeps denying. Once the binding is back the marked approval still
// does not count, and admission keeps the mark while that approval stands; a new approval,
// checked, puts the exception in force.
func TestExceptionApprovalNotCountedWithoutFence(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant, ns = "team-fence", "exception-fence-e2e"
	fp, latest := deniedScene(ctx, t, tenant, ns, "e2e-exception-fence")

	approver := approverClient(t, "security@corp")
	ex := requestException(t, tenantClient(t, tenant, "dev@team-fence"), fmt.Sprintf(`
metadata: {name: vendor-agent, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], kinds: [Deployment], names: [web-latest]}
  clusters: {names: [cluster-1]}
  owner: team-fence
  reason: the vendor's agent is only published as latest
  ticket: SEC-77
  expiresAt: %s`, tenant, fp.Name, ns, expiresIn(time.Hour)))
	waitException(t, ex, "Pending, the fence in place", func(live *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionPending)(live); err != nil {
			return err
		}
		return approvedCondition(policyhubv1.ExceptionPending, "requested by dev@team-fence; awaiting approval")(live)
	})

	restore := withoutBinding(t, "ValidatingAdmissionPolicyBinding", "policyhub-exception-approval")
	const missing = "ValidatingAdmissionPolicy policyhub-exception-approval has no ValidatingAdmissionPolicyBinding that denies every request it matches"
	waitException(t, ex, "FenceMissing", approvedCondition(policyhubv1.ReasonFenceMissing, missing))

	// The approval goes through unchecked, and does not count.
	if err := decide(ctx, t, approver, ex, policyhubv1.DecisionApproved, "security@corp"); err != nil {
		t.Fatalf("an approval without the fence: %v", err)
	}
	unchecked := waitException(t, ex, "the approval seen and not counted", func(live *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionPending)(live); err != nil {
			return err
		}
		if live.Status.UncheckedApproval == nil {
			return fmt.Errorf("the approval is not marked unchecked")
		}
		return approvedCondition(policyhubv1.ReasonFenceMissing, "the approval by security@corp does not count: "+missing)(live)
	})
	if a := unchecked.Status.UncheckedApproval; !equality.Semantic.DeepEqual(a, unchecked.Status.Approval) {
		t.Errorf("status.uncheckedApproval %+v is not the approval %+v", a, unchecked.Status.Approval)
	}
	if unchecked.Status.InForce != 0 {
		t.Errorf("in force in %d clusters without the fence", unchecked.Status.InForce)
	}
	noExceptionAnywhere(ctx, t)
	err := directClient(t, fleetOf(t).Cluster("cluster-1").Config).Create(ctx, latest.DeepCopy(), client.DryRunAll)
	assertKyvernoDenial(t, "an approval without the fence", err, ns, fp.Name)

	// The fence back: the marked approval still does not count, and its mark cannot be removed.
	restore()
	fenceInEffect(t, approver, ex)
	waitException(t, ex, "UncheckedApproval", approvedCondition(policyhubv1.ReasonUncheckedApproval,
		"the approval by security@corp at "+unchecked.Status.Approval.At.UTC().Format(time.RFC3339)+" was written while the admission fence was missing"))
	clear, err := json.Marshal(map[string]any{"status": map[string]any{"uncheckedApproval": nil}})
	if err != nil {
		t.Fatal(err)
	}
	err = approver.Status().Patch(ctx, unchecked.DeepCopy(), client.RawPatch("application/merge-patch+json", clear))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "status.uncheckedApproval marks an approval written while the admission fence was missing") {
		t.Fatalf("removing the mark: %v, want Forbidden", err)
	}
	noExceptionAnywhere(ctx, t)

	// A new approval, checked by the fence, counts (its comment tells it from the marked one even
	// within the same second).
	again, err := json.Marshal(map[string]any{"status": map[string]any{"approval": map[string]any{
		"decision": policyhubv1.DecisionApproved, "by": "security@corp", "generation": unchecked.Generation,
		"at": time.Now().UTC().Format(time.RFC3339), "comment": "approved again, with the fence"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := approver.Status().Patch(ctx, unchecked.DeepCopy(), client.RawPatch("application/merge-patch+json", again)); err != nil {
		t.Fatalf("a new approval: %v", err)
	}
	active := waitException(t, ex, "Active", func(live *policyhubv1.FleetPolicyException) error {
		if err := exceptionState(policyhubv1.ExceptionActive)(live); err != nil {
			return fmt.Errorf("%w; approval %+v, marked %+v", err, live.Status.Approval, live.Status.UncheckedApproval)
		}
		if live.Status.InForce != 1 {
			return fmt.Errorf("in force in %d clusters", live.Status.InForce)
		}
		return nil
	})
	if active.Status.UncheckedApproval != nil {
		t.Errorf("the mark stayed after a new approval: %+v", active.Status.UncheckedApproval)
	}
	admittedEventually(ctx, t, "cluster-1", latest, "admitted once approved with the fence")
}
