package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// pace is a pacing of push, beat for a fleet of clusters.
func pace(push, beat time.Duration, clusters int32) policyhubv1.SummaryPacing {
	return policyhubv1.SummaryPacing{PushInterval: metav1.Duration{Duration: push}, HeartbeatInterval: metav1.Duration{Duration: beat}, Clusters: clusters}
}

// The pacing the hub publishes as its fleet changes size, and when every summary is woken to
// publish it: only when an interval steps.
func TestFleetPacingWakesOnlyOnAStep(t *testing.T) {
	type step struct {
		clusters int
		want     policyhubv1.SummaryPacing
		wantWake bool
	}
	for _, tc := range []struct {
		name                         string
		summaryBudget, renewalBudget float64
		steps                        []step
	}{
		{"the first size is no change: nothing was published before it", 0, 0, []step{
			{1000, pace(160*time.Second, 2*time.Minute, 1000), false},
		}},
		{"growing within a step wakes nothing", 0, 0, []step{
			{3, pace(10*time.Second, time.Minute, 3), false},
			{4, pace(10*time.Second, time.Minute, 4), false},
			{100, pace(10*time.Second, time.Minute, 100), false},
		}},
		{"crossing the push step wakes every summary once", 0, 0, []step{
			{100, pace(10*time.Second, time.Minute, 100), false},
			{101, pace(20*time.Second, time.Minute, 101), true},
			{150, pace(20*time.Second, time.Minute, 150), false},
		}},
		{"shrinking back across it wakes them again", 0, 0, []step{
			{101, pace(20*time.Second, time.Minute, 101), false},
			{100, pace(10*time.Second, time.Minute, 100), true},
			{0, pace(10*time.Second, time.Minute, 0), false},
		}},
		{"the heartbeat alone stepping wakes them", 50, 5, []step{
			{300, pace(10*time.Second, time.Minute, 300), false},
			{301, pace(10*time.Second, 2*time.Minute, 301), true},
		}},
		{"smaller budgets: longer intervals, capped at an hour", 1, 1, []step{
			{1000, pace(1280*time.Second, 32*time.Minute, 1000), false},
			{100000, pace(time.Hour, time.Hour, 100000), true},
			{200000, pace(time.Hour, time.Hour, 200000), false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetPacing{summaryBudget: tc.summaryBudget, renewalBudget: tc.renewalBudget}
			for _, s := range tc.steps {
				p, wake := f.observe(s.clusters)
				if p != s.want || wake != s.wantWake {
					t.Errorf("%d clusters: published %+v, wake %v; want %+v, wake %v", s.clusters, p, wake, s.want, s.wantWake)
				}
			}
		})
	}
}

// A summary's status takes a pacing only when it asks something else of the agent: the same
// intervals sized for another fleet size write nothing.
func TestPublishPacing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		published *policyhubv1.SummaryPacing
		pacing    *policyhubv1.SummaryPacing // nil: the hub publishes none
		want      *policyhubv1.SummaryPacing
	}{
		{"none yet: published", nil, ptrTo(pace(10*time.Second, time.Minute, 5)), ptrTo(pace(10*time.Second, time.Minute, 5))},
		{"the same: kept", ptrTo(pace(10*time.Second, time.Minute, 5)), ptrTo(pace(10*time.Second, time.Minute, 5)), ptrTo(pace(10*time.Second, time.Minute, 5))},
		{"the same intervals for a fleet grown within the step: kept as sized", ptrTo(pace(10*time.Second, time.Minute, 5)), ptrTo(pace(10*time.Second, time.Minute, 7)), ptrTo(pace(10*time.Second, time.Minute, 5))},
		{"a longer push interval: published", ptrTo(pace(10*time.Second, time.Minute, 100)), ptrTo(pace(20*time.Second, time.Minute, 101)), ptrTo(pace(20*time.Second, time.Minute, 101))},
		{"a shorter heartbeat: published", ptrTo(pace(10*time.Second, 2*time.Minute, 101)), ptrTo(pace(10*time.Second, time.Minute, 100)), ptrTo(pace(10*time.Second, time.Minute, 100))},
		{"whatever else the status held: replaced", ptrTo(pace(-time.Second, 365*24*time.Hour, -3)), ptrTo(pace(10*time.Second, time.Minute, 5)), ptrTo(pace(10*time.Second, time.Minute, 5))},
		{"a hub that publishes none removes what was published", ptrTo(pace(20*time.Second, time.Minute, 101)), nil, nil},
		{"a hub that publishes none, none published: none", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &policyhubv1.PolicyReportSummary{}
			s.Status.Pacing = tc.published
			publishPacing(s, tc.pacing)
			if (s.Status.Pacing == nil) != (tc.want == nil) || (tc.want != nil && *s.Status.Pacing != *tc.want) {
				t.Errorf("status.pacing %+v, want %+v", s.Status.Pacing, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
