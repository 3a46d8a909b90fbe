package declare

import (
	"fmt"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ExceptionVerdict is what a FleetPolicyException is at a moment, by the hub's clock.
type ExceptionVerdict struct {
	// State is one of policyhubv1.Exception*: only Active is dispatched to any cluster.
	State string
	// Reason is the Approved condition's reason when it is not the state's: why no approval
	// counts (policyhubv1.ReasonFenceMissing, ReasonNotApprovable, ReasonUncheckedApproval).
	Reason string
	// Message says why, naming the field or the decision.
	Message string
	// Wake is when the state changes by itself (the end date comes, and the state turns Expired);
	// zero once expired or invalid, when only a change of the exception can change it.
	Wake time.Duration
	// MarkUnchecked: the approval was seen while the admission fence was missing; the hub marks it
	// (status.uncheckedApproval) so that it never counts.
	MarkUnchecked bool
}

// ExceptionState judges an exception at now: the end date first (an expired exception is
// expired whatever its approval says), then its bounds (expiresAt after creation, within
// maxLifetime of it), then the approver's decision (see approvalVerdict), which counts only for
// the current generation of the spec, only from someone who neither requested nor changed it,
// and, for an approval, only while the admission fence is in place. The admission policies check
// the same; this is the hub's own check, for what admission cannot see (the clock moves on, the
// fence may be removed).
func ExceptionState(ex *policyhubv1.FleetPolicyException, now time.Time, maxLifetime time.Duration, rules ApprovalRules) ExceptionVerdict {
	expires := ex.Spec.ExpiresAt.Time
	created := ex.CreationTimestamp.Time
	if !now.Before(expires) {
		return ExceptionVerdict{State: policyhubv1.ExceptionExpired,
			Message: fmt.Sprintf("expired at %s (spec.expiresAt): removed from every cluster", expires.UTC().Format(time.RFC3339))}
	}
	switch {
	case !created.IsZero() && !expires.After(created):
		return ExceptionVerdict{State: policyhubv1.ExceptionInvalid, Message: "spec.expiresAt must be after the exception's creation"}
	case !created.IsZero() && maxLifetime > 0 && expires.Sub(created) > maxLifetime:
		return ExceptionVerdict{State: policyhubv1.ExceptionInvalid, Message: fmt.Sprintf(
			"spec.expiresAt is %s after the exception's creation, beyond the hub's maximum lifetime %s", roundDuration(expires.Sub(created)), maxLifetime)}
	}
	v := approvalVerdict(ex, rules)
	v.Wake = expires.Sub(now)
	if v.State == policyhubv1.ExceptionActive {
		v.Message = fmt.Sprintf("%s, until %s", v.Message, expires.UTC().Format(time.RFC3339))
	}
	return v
}

// roundDuration prints a duration in whole seconds.
func roundDuration(d time.Duration) time.Duration { return d.Round(time.Second) }
