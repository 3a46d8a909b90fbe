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
		requestedBy string
		generation  int64
		expiresAt   time.Time
		now         time.Time
		maxLifetime time.Duration
		state       string
		message     string
		wake        time.Duration
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
			if tc.requestedBy == "-" {
				ex.Spec.RequestedBy = ""
			}
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
			got := ExceptionState(ex, at, maxLifetime)
			if got.State != tc.state || !strings.Contains(got.Message, tc.message) || got.Wake != tc.wake {
				t.Fatalf("ExceptionState = %+v, want state %s, message containing %q, wake %s", got, tc.state, tc.message, tc.wake)
			}
		})
	}
}
