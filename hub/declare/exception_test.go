package declare

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestExceptionState(t *testing.T) {
	created := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	expires := created.Add(48 * time.Hour)
	now := created.Add(time.Hour)
	approval := func(decision, by string, generation int64) *policyhubv1.ExceptionApproval {
		return &policyhubv1.ExceptionApproval{Decision: decision, By: by, Generation: generation}
	}
	cases := []struct {
		name        string
		approval    *policyhubv1.ExceptionApproval
		unchecked   *policyhubv1.ExceptionApproval
		requestedBy string
		changedBy   []string
		rules       ApprovalRules
		generation  int64
		expiresAt   time.Time
		now         time.Time
		maxLifetime time.Duration
		state       string
		reason      string
		message     string
		wake        time.Duration
		mark        bool
	}{
		{name: "no decision yet", state: policyhubv1.ExceptionPending, message: "requested by bob; awaiting approval", wake: 47 * time.Hour},
		{name: "approved by another user", approval: approval(policyhubv1.DecisionApproved, "alice", 1),
			state: policyhubv1.ExceptionActive, message: "approved by alice", wake: 47 * time.Hour},
		{name: "approved for an older generation", approval: approval(policyhubv1.DecisionApproved, "alice", 1), generation: 2,
			state: policyhubv1.ExceptionPending, message: "generation 2 awaits approval", wake: 47 * time.Hour},
		{name: "approved by its requester", approval: approval(policyhubv1.DecisionApproved, "bob", 1),
			state: policyhubv1.ExceptionPending, message: "bob requested the exception and cannot decide on it", wake: 47 * time.Hour},
		{name: "no requester stamped", approval: approval(policyhubv1.DecisionApproved, "alice", 1), requestedBy: "-",
			state: policyhubv1.ExceptionPending, message: "spec.requestedBy is not set", wake: 47 * time.Hour},
		{name: "approved by a writer of the spec", approval: approval(policyhubv1.DecisionApproved, "carol", 1), changedBy: []string{"dave", "carol"},
			state: policyhubv1.ExceptionPending, message: "carol changed the exception's spec (spec.changedBy) and cannot decide on it", wake: 47 * time.Hour},
		{name: "revoked by a writer of the spec", approval: approval(policyhubv1.DecisionRevoked, "carol", 1), changedBy: []string{"carol"},
			state: policyhubv1.ExceptionPending, message: "carol changed the exception's spec", wake: 47 * time.Hour},
		{name: "approved by another user, the spec changed by others", approval: approval(policyhubv1.DecisionApproved, "alice", 1), changedBy: []string{"dave", "carol"},
			state: policyhubv1.ExceptionActive, message: "approved by alice", wake: 47 * time.Hour},
		// Without the fence nobody checked who wrote the approval: it does not count, and is
		// marked so that it does not count once the fence is back either.
		{name: "approved without the fence", approval: approval(policyhubv1.DecisionApproved, "alice", 1), rules: ApprovalRules{FenceMissing: "ValidatingAdmissionPolicy x is not installed"},
			state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonFenceMissing, mark: true,
			message: "the approval by alice does not count: ValidatingAdmissionPolicy x is not installed", wake: 47 * time.Hour},
		{name: "approved without the fence, marked already", approval: approval(policyhubv1.DecisionApproved, "alice", 1), unchecked: approval(policyhubv1.DecisionApproved, "alice", 1),
			rules: ApprovalRules{FenceMissing: "x"}, state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonFenceMissing, message: "does not count", wake: 47 * time.Hour},
		{name: "awaiting approval without the fence", rules: ApprovalRules{FenceMissing: "ValidatingAdmissionPolicy x is not installed"},
			state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonFenceMissing,
			message: "requested by bob; awaiting approval; and ValidatingAdmissionPolicy x is not installed: no approval counts until it is in place", wake: 47 * time.Hour},
		{name: "approved with the fence back, marked unchecked", approval: approval(policyhubv1.DecisionApproved, "alice", 1), unchecked: approval(policyhubv1.DecisionApproved, "alice", 1),
			state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonUncheckedApproval, message: "was written while the admission fence was missing", wake: 47 * time.Hour},
		{name: "approved again with the fence back", approval: approval(policyhubv1.DecisionApproved, "alice", 1),
			unchecked: &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 1, Comment: "earlier"},
			state:     policyhubv1.ExceptionActive, message: "approved by alice", wake: 47 * time.Hour},
		{name: "denied without the fence", approval: approval(policyhubv1.DecisionDenied, "alice", 1), rules: ApprovalRules{FenceMissing: "x"},
			state: policyhubv1.ExceptionDenied, message: "denied by alice", wake: 47 * time.Hour},
		{name: "revoked without the fence", approval: approval(policyhubv1.DecisionRevoked, "alice", 1), rules: ApprovalRules{FenceMissing: "x"},
			state: policyhubv1.ExceptionRevoked, message: "revoked by alice", wake: 47 * time.Hour},
		// A ServiceAccount's request is approvable only if the hub admin listed it.
		{name: "requested by a ServiceAccount", requestedBy: "system:serviceaccount:team-a:filer",
			state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonNotApprovable, message: "ServiceAccount team-a/filer requested it", wake: 47 * time.Hour},
		{name: "requested by a ServiceAccount, approved", requestedBy: "system:serviceaccount:team-a:filer", approval: approval(policyhubv1.DecisionApproved, "alice", 1),
			rules: ApprovalRules{ApprovableServiceAccounts: []string{"system:serviceaccount:flux-system:kustomize-controller"}},
			state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonNotApprovable,
			message: "the approval by alice does not count: ServiceAccount team-a/filer requested it", wake: 47 * time.Hour},
		{name: "changed by a ServiceAccount, approved", changedBy: []string{"system:serviceaccount:team-a:filer"}, approval: approval(policyhubv1.DecisionApproved, "alice", 1),
			state: policyhubv1.ExceptionPending, reason: policyhubv1.ReasonNotApprovable, message: "ServiceAccount team-a/filer changed it", wake: 47 * time.Hour},
		{name: "requested by an allowed ServiceAccount, approved", requestedBy: "system:serviceaccount:flux-system:kustomize-controller",
			approval: approval(policyhubv1.DecisionApproved, "alice", 1),
			rules:    ApprovalRules{ApprovableServiceAccounts: []string{"system:serviceaccount:flux-system:kustomize-controller"}},
			state:    policyhubv1.ExceptionActive, message: "approved by alice", wake: 47 * time.Hour},
		{name: "requested by a ServiceAccount, denied", requestedBy: "system:serviceaccount:team-a:filer", approval: approval(policyhubv1.DecisionDenied, "alice", 1),
			state: policyhubv1.ExceptionDenied, message: "denied by alice", wake: 47 * time.Hour},
		{name: "denied", approval: approval(policyhubv1.DecisionDenied, "alice", 1),
			state: policyhubv1.ExceptionDenied, message: "denied by alice", wake: 47 * time.Hour},
		{name: "revoked", approval: approval(policyhubv1.DecisionRevoked, "alice", 1),
			state: policyhubv1.ExceptionRevoked, message: "revoked by alice", wake: 47 * time.Hour},
		{name: "approved, at the end date", approval: approval(policyhubv1.DecisionApproved, "alice", 1), now: expires,
			state: policyhubv1.ExceptionExpired, message: "expired at 2026-11-03T12:00:00Z"},
		{name: "approved, past the end date", approval: approval(policyhubv1.DecisionApproved, "alice", 1), now: expires.Add(time.Second),
			state: policyhubv1.ExceptionExpired, message: "spec.expiresAt"},
		{name: "pending, past the end date", now: expires.Add(time.Hour), state: policyhubv1.ExceptionExpired, message: "expired"},
		{name: "approved, one second before the end", approval: approval(policyhubv1.DecisionApproved, "alice", 1), now: expires.Add(-time.Second),
			state: policyhubv1.ExceptionActive, wake: time.Second},
		{name: "ends before its creation", approval: approval(policyhubv1.DecisionApproved, "alice", 1), expiresAt: created.Add(-time.Hour),
			now: created.Add(-2 * time.Hour), state: policyhubv1.ExceptionInvalid, message: "spec.expiresAt must be after"},
		{name: "beyond the maximum lifetime", approval: approval(policyhubv1.DecisionApproved, "alice", 1), maxLifetime: 24 * time.Hour,
			state: policyhubv1.ExceptionInvalid, message: "spec.expiresAt is 48h0m0s after the exception's creation, beyond the hub's maximum lifetime 24h0m0s"},
		{name: "at the maximum lifetime", approval: approval(policyhubv1.DecisionApproved, "alice", 1), maxLifetime: 48 * time.Hour,
			state: policyhubv1.ExceptionActive, wake: 47 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex := &policyhubv1.FleetPolicyException{}
			ex.CreationTimestamp = metav1.NewTime(created)
			ex.Generation = 1
			if tc.generation != 0 {
				ex.Generation = tc.generation
			}
			ex.Spec.RequestedBy = "bob"
			switch tc.requestedBy {
			case "":
			case "-":
				ex.Spec.RequestedBy = ""
			default:
				ex.Spec.RequestedBy = tc.requestedBy
			}
			ex.Spec.ChangedBy = tc.changedBy
			ex.Status.UncheckedApproval = tc.unchecked
			ex.Spec.ExpiresAt = metav1.NewTime(expires)
			if !tc.expiresAt.IsZero() {
				ex.Spec.ExpiresAt = metav1.NewTime(tc.expiresAt)
			}
			ex.Status.Approval = tc.approval
			at := now
			if !tc.now.IsZero() {
				at = tc.now
			}
			maxLifetime := policyhubv1.DefaultMaxExceptionLifetime
			if tc.maxLifetime != 0 {
				maxLifetime = tc.maxLifetime
			}
			got := ExceptionState(ex, at, maxLifetime, tc.rules)
			if got.State != tc.state || got.Reason != tc.reason || !strings.Contains(got.Message, tc.message) || got.Wake != tc.wake || got.MarkUnchecked != tc.mark {
				t.Fatalf("ExceptionState = %+v, want state %s, reason %q, message containing %q, wake %s, mark %t", got, tc.state, tc.reason, tc.message, tc.wake, tc.mark)
			}
		})
	}
}

func TestServiceAccountUsers(t *testing.T) {
	got, err := ServiceAccountUsers([]string{"flux-system/kustomize-controller", " argocd/argocd-application-controller"})
	if err != nil || strings.Join(got, ",") != "system:serviceaccount:flux-system:kustomize-controller,system:serviceaccount:argocd:argocd-application-controller" {
		t.Fatalf("ServiceAccountUsers = %v, %v", got, err)
	}
	for _, bad := range []string{"kustomize-controller", "flux-system/", "/x", "Flux/x", "a/b/c", "system:serviceaccount:a:b"} {
		if _, err := ServiceAccountUsers([]string{bad}); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
