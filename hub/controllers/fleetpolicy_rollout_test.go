package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/rollout"
)

// A wave is judged only on what Kyverno reported of the version that arrived: a summary
// generated after it, every result made after it, and a policy without results only once
// Kyverno has had time to report it.
func TestFreshReport(t *testing.T) {
	arrived := time.Date(2026, 11, 24, 10, 0, 0, 500_000_000, time.UTC) // 10:00:00.5
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: arrived.Truncate(time.Second).Add(d)} }
	for _, tc := range []struct {
		name string
		res  aggregate.Results
		want bool
	}{
		{"no summary time", aggregate.Results{}, false},
		{"generated before the version arrived", aggregate.Results{ReportTime: at(0), OldestResult: at(0).Time}, false},
		{"an older result is still there", aggregate.Results{ReportTime: at(5 * time.Second), OldestResult: at(-time.Second).Time}, false},
		{"every result made since (the same second counts)", aggregate.Results{ReportTime: at(5 * time.Second), OldestResult: at(0).Time}, true},
		{"results without times", aggregate.Results{ReportTime: at(5 * time.Second)}, true},
		{"a policy without results, too soon", aggregate.Results{ReportTime: at(5 * time.Second), Unlisted: 1}, false},
		{"a policy without results, after the grace", aggregate.Results{ReportTime: at(reportGrace + time.Second), Unlisted: 1}, true},
	} {
		if got := freshReport(tc.res, arrived, true); got != tc.want {
			t.Errorf("%s: fresh %v, want %v", tc.name, got, tc.want)
		}
	}
	// After a hub restart the arrival is the moment the wave was seen synced, and the results
	// Kyverno made before it are of what the cluster held all along.
	older := aggregate.Results{ReportTime: at(5 * time.Second), OldestResult: at(-time.Hour).Time}
	if !freshReport(older, arrived, false) || freshReport(older, arrived, true) {
		t.Error("older results count only when the arrival is not known to be a write")
	}
}

// Every phase change is an Event, a held gate a Warning; a new version says it started.
func TestRolloutTransitions(t *testing.T) {
	waves := []rollout.Wave{{Name: "staging", Gate: rollout.Gate{MaxFail: 0}}, {Name: "prod"}}
	prev := &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{{Name: "staging", Phase: policyhubv1.WaveAuditing}, {Name: "prod", Phase: policyhubv1.WavePending}}}
	next := &policyhubv1.RolloutStatus{Revision: "r1", Waves: []policyhubv1.WaveStatus{
		{Name: "staging", Phase: policyhubv1.WaveWaiting, Clusters: 1, Fail: 2, Reason: "2 fail results, at most 0 allowed"},
		{Name: "prod", Phase: policyhubv1.WavePending},
	}}
	events := rolloutTransitions(prev, next, waves)
	if len(events) != 1 || events[0].eventType != corev1.EventTypeWarning || events[0].reason != "WaveWaiting" ||
		events[0].message != "wave staging: Auditing -> Waiting (1 clusters): 2 fail results, at most 0 allowed" {
		t.Fatalf("events %+v", events)
	}
	if got := rolloutTransitions(next, next, waves); len(got) != 0 {
		t.Errorf("nothing changed, events %+v", got)
	}
	started := rolloutTransitions(prev, &policyhubv1.RolloutStatus{Revision: "r2", Waves: []policyhubv1.WaveStatus{{Name: "staging", Phase: policyhubv1.WaveAuditing}}}, waves)
	if len(started) != 2 || started[0].reason != "RolloutStarted" || !strings.Contains(started[0].message, "revision r2 (was r1)") || started[1].reason != "WaveAuditing" {
		t.Errorf("a new revision: events %+v", started)
	}
}
