package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/render"
)

// The watches of ClusterStatusSlices wake exceptions, FleetPolicies and PolicySets only when a
// slice of the kinds they follow changes where a declaration is synced, not when results move.
func TestSliceWatchesPassOnlyWhereSyncedChanges(t *testing.T) {
	slice := func(kind string, phases ...policyhubv1.ClusterPhase) *policyhubv1.ClusterStatusSlice {
		s := &policyhubv1.ClusterStatusSlice{Declaration: policyhubv1.DeclarationRef{Kind: kind, Name: "x"}}
		for i, p := range phases {
			s.Clusters = append(s.Clusters, policyhubv1.ClusterStatus{Name: string(rune('a' + i)), Phase: p})
		}
		return s
	}
	synced, failed := policyhubv1.ClusterPhaseSynced, policyhubv1.ClusterPhaseFailed
	withResults := slice(policyhubv1.KindFleetPolicyException, synced, failed)
	withResults.Clusters[0].Results = &policyhubv1.ResultCounts{Skip: 3}
	for _, tc := range []struct {
		name     string
		old, new *policyhubv1.ClusterStatusSlice
		want     bool
	}{
		{"a cluster synced", slice(policyhubv1.KindFleetPolicyException, synced, failed), slice(policyhubv1.KindFleetPolicyException, synced, synced), true},
		{"a cluster no longer synced", slice(policyhubv1.KindFleetPolicyException, synced), slice(policyhubv1.KindFleetPolicyException), true},
		{"results only", slice(policyhubv1.KindFleetPolicyException, synced, failed), withResults, false},
		{"another kind's slice", slice(policyhubv1.KindApplicationPolicy), slice(policyhubv1.KindApplicationPolicy, synced), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}
			got := engine.SlicesOfKinds(policyhubv1.KindFleetPolicyException).Update(e) && engine.SyncedClustersChanged().Update(e)
			if got != tc.want {
				t.Errorf("passes %v, want %v", got, tc.want)
			}
		})
	}
}

// A decision written again, even alike but for its time or comment, wakes the exception: it may
// replace one the hub marked as written without the fence. The hub's own status writes do not.
func TestApprovalChangedPassesEveryNewDecision(t *testing.T) {
	at := func(sec int) *metav1.Time { return &metav1.Time{Time: time.Date(2030, 1, 1, 0, 0, sec, 0, time.UTC)} }
	withApproval := func(a *policyhubv1.ExceptionApproval) *policyhubv1.FleetPolicyException {
		return &policyhubv1.FleetPolicyException{Status: policyhubv1.FleetPolicyExceptionStatus{Approval: a}}
	}
	first := &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 1, At: at(1)}
	marked := withApproval(first)
	marked.Status.UncheckedApproval = first.DeepCopy()
	for _, tc := range []struct {
		name     string
		old, new *policyhubv1.FleetPolicyException
		want     bool
	}{
		{"a first decision", withApproval(nil), withApproval(first), true},
		{"the same approval, later", withApproval(first), withApproval(&policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 1, At: at(2)}), true},
		{"the same approval, with a comment", withApproval(first), withApproval(&policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 1, At: at(1), Comment: "again"}), true},
		{"the hub marks it", withApproval(first), marked, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := approvalChanged().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("passes %v, want %v", got, tc.want)
			}
		})
	}
}

// An approved exception that can take effect nowhere as it stands is Invalid, not Active, saying
// why; its approval stands. One refused in some places only, or in force somewhere, stays Active.
func TestExceptionInForceNowhereIsNotActive(t *testing.T) {
	approved := declare.ExceptionVerdict{State: policyhubv1.ExceptionActive, Message: "approved by alice"}
	targets := func(allowed []string, notGranted ...string) *render.Targets {
		t := &render.Targets{Objects: map[string][]*unstructured.Unstructured{}, NotGranted: notGranted}
		for _, c := range allowed {
			t.Objects[c] = []*unstructured.Unstructured{{}}
		}
		return t
	}
	for _, tc := range []struct {
		name      string
		r         *engine.Rendering
		state     string
		refusedIn string
	}{
		{"a wildcard namespace", &engine.Rendering{Targets: targets(nil), Detail: exceptionRendering{refused: &render.InvalidError{Reason: "InvalidException", Err: errors.New(`spec.resources.namespaces: "*" has a wildcard`)}}},
			policyhubv1.ExceptionInvalid, `InvalidException: spec.resources.namespaces: "*" has a wildcard`},
		{"no place granted", &engine.Rendering{Targets: targets(nil, "cluster-1/default", "cluster-2/default")},
			policyhubv1.ExceptionInvalid, "NotGranted: not one of its places is granted to namespace team-a"},
		{"granted in one cluster", &engine.Rendering{Targets: targets([]string{"cluster-1"}, "cluster-2/default")}, policyhubv1.ExceptionActive, ""},
		{"in force", &engine.Rendering{Targets: targets([]string{"cluster-1"})}, policyhubv1.ExceptionActive, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &policyhubv1.FleetPolicyException{}
			ex.Namespace, ex.Generation = "team-a", 1
			d := &fleetPolicyException{FleetPolicyException: ex, verdict: approved}
			d.Progress(tc.r, nil, nil, time.Now())
			if d.Status.State != tc.state || !strings.HasPrefix(d.refused, tc.refusedIn) || (tc.refusedIn == "") != (d.refused == "") {
				t.Errorf("state %s, refused %q; want %s, %q", d.Status.State, d.refused, tc.state, tc.refusedIn)
			}
			if !meta.IsStatusConditionTrue(d.Status.Conditions, policyhubv1.ConditionApproved) {
				t.Errorf("the approval no longer counts: %+v", d.Status.Conditions)
			}
		})
	}
}
