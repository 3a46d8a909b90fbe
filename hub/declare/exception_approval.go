package declare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ApprovalRules are what the hub knows, beyond an exception itself, to count its approval.
type ApprovalRules struct {
	// FenceMissing says what of the admission fence (ExceptionFence) is missing; empty while it is
	// in place. While it is missing no approval counts: nobody checked who wrote it.
	FenceMissing string
	// ApprovableServiceAccounts are the user names (system:serviceaccount:NAMESPACE:NAME) of the
	// ServiceAccounts whose requests and spec changes may be approved, e.g. a GitOps controller's.
	// Any other ServiceAccount's never may: whoever may take its token could approve them.
	ApprovableServiceAccounts []string
}

// approvalVerdict is the exception's state by its decision alone (its dates are judged before).
// A denial or a revocation counts whenever its writer is not the requester or a writer of the
// spec (it only takes away); an approval counts only while the fence is in place, if it was not
// written while the fence was missing, and if every writer of the spec may have it approved.
func approvalVerdict(ex *policyhubv1.FleetPolicyException, rules ApprovalRules) ExceptionVerdict {
	blocked, blockedReason := approvalBlocked(ex, rules)
	pending := func(message string) ExceptionVerdict {
		v := ExceptionVerdict{State: policyhubv1.ExceptionPending, Message: message}
		if blocked != "" {
			v.Reason, v.Message = blockedReason, message+"; and "+blocked
		}
		return v
	}
	a, requester := ex.Status.Approval, ex.Spec.RequestedBy
	switch {
	case a == nil && requester != "":
		return pending("requested by " + requester + "; awaiting approval")
	case a == nil:
		return pending("awaiting approval")
	case a.Generation != ex.Generation:
		return pending(fmt.Sprintf("the %s decision by %s was for generation %d; generation %d awaits approval", a.Decision, a.By, a.Generation, ex.Generation))
	case requester == "":
		// Nobody stamped or checked the requester, so no decision can be told apart from the
		// requester's own.
		return pending("spec.requestedBy is not set (policyhub's admission policy requires it): no approval counts without it")
	case a.By == requester:
		return pending(fmt.Sprintf("%s requested the exception and cannot decide on it: awaiting another approver", a.By))
	case slices.Contains(ex.Spec.ChangedBy, a.By):
		return pending(fmt.Sprintf("%s changed the exception's spec (spec.changedBy) and cannot decide on it: awaiting another approver", a.By))
	}
	switch a.Decision {
	case policyhubv1.DecisionRevoked:
		return ExceptionVerdict{State: policyhubv1.ExceptionRevoked, Message: fmt.Sprintf("revoked by %s: removed from every cluster", a.By)}
	case policyhubv1.DecisionDenied:
		return ExceptionVerdict{State: policyhubv1.ExceptionDenied, Message: fmt.Sprintf("denied by %s", a.By)}
	}
	unchecked := sameApproval(a, ex.Status.UncheckedApproval)
	switch {
	case rules.FenceMissing != "":
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Reason: policyhubv1.ReasonFenceMissing, MarkUnchecked: !unchecked, Message: fmt.Sprintf(
			"the approval by %s does not count: %s, so nobody checked who wrote it; it will not count once the fence is back either: an approver must approve again then",
			a.By, rules.FenceMissing)}
	case unchecked:
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Reason: policyhubv1.ReasonUncheckedApproval, Message: fmt.Sprintf(
			"the approval by %s%s was written while the admission fence was missing, so nobody checked it (status.uncheckedApproval): it never counts; an approver must approve again",
			a.By, approvedAt(a))}
	case blocked != "":
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Reason: blockedReason, Message: fmt.Sprintf("the approval by %s does not count: %s", a.By, blocked)}
	}
	return ExceptionVerdict{State: policyhubv1.ExceptionActive, Message: "approved by " + a.By}
}

// approvalBlocked says why no approval of the exception can count, whoever gives it: the fence is
// missing, or a writer of its spec is a ServiceAccount the hub does not allow.
func approvalBlocked(ex *policyhubv1.FleetPolicyException, rules ApprovalRules) (message, reason string) {
	if rules.FenceMissing != "" {
		return rules.FenceMissing + ": no approval counts until it is in place", policyhubv1.ReasonFenceMissing
	}
	writers := append([]string{ex.Spec.RequestedBy}, ex.Spec.ChangedBy...)
	for i, w := range writers {
		namespace, name, err := serviceaccount.SplitUsername(w)
		if err != nil || slices.Contains(rules.ApprovableServiceAccounts, w) {
			continue
		}
		did := "requested"
		if i > 0 {
			did = "changed"
		}
		return fmt.Sprintf("ServiceAccount %s/%s %s it, and the hub does not allow approving what a ServiceAccount asks for unless its admin listed it (--approvable-service-accounts): "+
			"whoever may take its token could approve their own request; no approval of it counts, request it as a user", namespace, name, did), policyhubv1.ReasonNotApprovable
	}
	return "", ""
}

func approvedAt(a *policyhubv1.ExceptionApproval) string {
	if a.At == nil {
		return ""
	}
	return " at " + a.At.UTC().Format(time.RFC3339)
}

// sameApproval says whether a and b are the same decision, written alike.
func sameApproval(a, b *policyhubv1.ExceptionApproval) bool {
	return a != nil && b != nil && equality.Semantic.DeepEqual(*a, *b)
}

// ServiceAccountUsers are the user names of ServiceAccounts named NAMESPACE/NAME (as the hub's
// --approvable-service-accounts lists them), each checked.
func ServiceAccountUsers(names []string) ([]string, error) {
	users := make([]string, 0, len(names))
	for _, n := range names {
		namespace, name, ok := strings.Cut(strings.TrimSpace(n), "/")
		if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return nil, fmt.Errorf("%q is not a ServiceAccount as NAMESPACE/NAME", n)
		}
		users = append(users, serviceaccount.MakeUsername(namespace, name))
	}
	return users, nil
}
