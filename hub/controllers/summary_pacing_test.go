package controllers

import (
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The pacing the hub publishes as its fleet changes size, and when every summary is woken to
// publish it: only when an interval steps, so a fleet growing within a step writes nothing.
func TestFleetPacingWakesOnlyOnASteps(t *testing.T) {
	type step struct {
		clusters     int
		wantPush     time.Duration
		wantBeat     time.Duration
		wantClusters int32
		wantWake     bool
	}
	for _, tc := range []struct {
		name                         string
		summaryBudget, renewalBudget float64
		steps                        []step
	}{
		{"the first size is no change: nothing was published before it", 0, 0, []step{
			{1000, 160 * time.Second, 2 * time.Minute, 1000, false},
		}},
		{"growing within a step keeps what was published, its size too", 0, 0, []step{
			{3, 10 * time.Second, time.Minute, 3, false},
			{4, 10 * time.Second, time.Minute, 3, false},
			{100, 10 * time.Second, time.Minute, 3, false},
		}},
		{"crossing the push step wakes every summary once", 0, 0, []step{
			{100, 10 * time.Second, time.Minute, 100, false},
			{101, 20 * time.Second, time.Minute, 101, true},
			{150, 20 * time.Second, time.Minute, 101, false},
		}},
		{"shrinking back across it wakes them again", 0, 0, []step{
			{101, 20 * time.Second, time.Minute, 101, false},
			{100, 10 * time.Second, time.Minute, 100, true},
			{0, 10 * time.Second, time.Minute, 100, false},
		}},
		{"the heartbeat alone stepping wakes them", 50, 5, []step{
			{300, 10 * time.Second, time.Minute, 300, false},
			{301, 10 * time.Second, 2 * time.Minute, 301, true},
		}},
		{"smaller budgets: longer intervals, for a fleet of 1000", 1, 1, []step{
			{1000, 1280 * time.Second, 32 * time.Minute, 1000, false},
			{100000, time.Hour, time.Hour, 100000, true},
			{200000, time.Hour, time.Hour, 100000, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetPacing{summaryBudget: tc.summaryBudget, renewalBudget: tc.renewalBudget}
			for _, s := range tc.steps {
				p, wake := f.observe(s.clusters)
				want := policyhubv1.SummaryPacing{Clusters: s.wantClusters}
				want.PushInterval.Duration, want.HeartbeatInterval.Duration = s.wantPush, s.wantBeat
				if p != want || wake != s.wantWake {
					t.Errorf("%d clusters: published %+v, wake %v; want %+v, wake %v", s.clusters, p, wake, want, s.wantWake)
				}
			}
		})
	}
}
