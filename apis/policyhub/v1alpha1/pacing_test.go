package v1alpha1

import (
	"testing"
	"time"
)

func TestPacingForSharesTheBudgetsByDoubling(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		clusters               int
		summaries, renewals    float64
		wantPush, wantHearbeat time.Duration
	}{
		{"no cluster: the floors", 0, 10, 10, 10 * time.Second, time.Minute},
		{"a small fleet: the floors", 50, 10, 10, 10 * time.Second, time.Minute},
		{"100 clusters fill 10/s at 10 s", 100, 10, 10, 10 * time.Second, time.Minute},
		{"101 clusters need the next doubling", 101, 10, 10, 20 * time.Second, time.Minute},
		{"1,000 clusters", 1000, 10, 10, 160 * time.Second, 2 * time.Minute},
		{"10,000 clusters", 10000, 10, 10, 1280 * time.Second, 32 * time.Minute},
		{"a bigger budget", 1000, 100, 20, 10 * time.Second, time.Minute},
		{"zero budgets mean the defaults", 1000, 0, -1, 160 * time.Second, 2 * time.Minute},
		{"capped at an hour", 10_000_000, 10, 10, time.Hour, time.Hour},
		{"a negative fleet is none", -5, 10, 10, 10 * time.Second, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PacingFor(tc.clusters, tc.summaries, tc.renewals)
			if p.PushInterval.Duration != tc.wantPush || p.HeartbeatInterval.Duration != tc.wantHearbeat {
				t.Fatalf("PacingFor(%d, %v, %v) = push %s, heartbeat %s; want %s, %s", tc.clusters, tc.summaries, tc.renewals,
					p.PushInterval.Duration, p.HeartbeatInterval.Duration, tc.wantPush, tc.wantHearbeat)
			}
			if want := int32(max(tc.clusters, 0)); p.Clusters != want {
				t.Fatalf("Clusters = %d, want %d", p.Clusters, want)
			}
		})
	}
}
