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
	// Message says why, naming the field or the decision.
	Message string
	// Wake is when the state changes by itself (the end date comes, and the state turns Expired);
	// zero once expired or invalid, when only a change of the exception can change it.
	Wake time.Duration
}

// ExceptionState judges an exception at now: the end date first (an expired exception is
// expired whatever its approval says), then its bounds (expiresAt after creation, within
// maxLifetime of it), then the approver's decision, which counts only for the current
// generation of the spec and only from someone other than its requester. The admission policy
// checks the same; this is the hub's own check, for hubs installed without it and for what
// admission cannot see (the clock moves on).
func ExceptionState(ex *policyhubv1.FleetPolicyException, now time.Time, maxLifetime time.Duration) ExceptionVerdict {
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
	wake := expires.Sub(now)
	a := ex.Status.Approval
	switch {
	case a == nil && ex.Spec.RequestedBy != "":
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Message: "requested by " + ex.Spec.RequestedBy + "; awaiting approval", Wake: wake}
	case a == nil:
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Message: "awaiting approval", Wake: wake}
	case a.Generation != ex.Generation:
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Wake: wake, Message: fmt.Sprintf(
			"the %s decision by %s was for generation %d; generation %d awaits approval", a.Decision, a.By, a.Generation, ex.Generation)}
	case ex.Spec.RequestedBy == "":
		// Without the admission policy nobody stamped the requester, so no approval can be told
		// apart from a self-approval.
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Wake: wake,
			Message: "spec.requestedBy is not set (policyhub's admission policy stamps it): no approval counts without it"}
	case a.By == ex.Spec.RequestedBy:
		return ExceptionVerdict{State: policyhubv1.ExceptionPending, Wake: wake, Message: fmt.Sprintf(
			"%s requested the exception and cannot decide on it: awaiting another approver", a.By)}
	}
	switch a.Decision {
	case policyhubv1.DecisionApproved:
		return ExceptionVerdict{State: policyhubv1.ExceptionActive, Wake: wake, Message: fmt.Sprintf(
			"approved by %s, until %s", a.By, expires.UTC().Format(time.RFC3339))}
	case policyhubv1.DecisionRevoked:
		return ExceptionVerdict{State: policyhubv1.ExceptionRevoked, Wake: wake, Message: fmt.Sprintf("revoked by %s: removed from every cluster", a.By)}
	default:
		return ExceptionVerdict{State: policyhubv1.ExceptionDenied, Wake: wake, Message: fmt.Sprintf("denied by %s", a.By)}
	}
}

// roundDuration prints a duration in whole seconds.
func roundDuration(d time.Duration) time.Duration { return d.Round(time.Second) }
