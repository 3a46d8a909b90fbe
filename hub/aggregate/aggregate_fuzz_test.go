package aggregate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ForPolicies never panics and never returns a negative count, whatever a summary holds (an
// older CRD may let anything through), and the hub's staleness never trusts the agent's clock.
func FuzzAggregate(f *testing.F) {
	f.Add("require-labels", "", "ClusterPolicy", int64(3), int64(2), int64(1), uint8(1), int64(0), int64(0), int64(60), true)
	f.Add("require-labels", "shop", "", int64(-1000), int64(-1), int64(-5), uint8(3), int64(3600), int64(-30), int64(0), true)
	f.Add("p", "", "Kind", int64(1<<62), int64(1<<62), int64(1<<62), uint8(2), int64(-3600), int64(0), int64(-1), false)
	f.Fuzz(func(t *testing.T, name, namespace, kind string, pass, fail, blocked int64, copies uint8, skewSeconds, seenSecondsAgo, heartbeatSeconds int64, seen bool) {
		now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		// Bounded so that times stay representable: a cluster clock off by up to ~68 years.
		skew, ago := time.Duration(int32(skewSeconds))*time.Second, time.Duration(int32(seenSecondsAgo))*time.Second
		s := &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{
			GeneratedAt:       &metav1.Time{Time: now.Add(-ago + skew)},
			HeartbeatInterval: &metav1.Duration{Duration: time.Duration(heartbeatSeconds) * time.Second},
		}}
		for i := range int(copies % 5) {
			s.Spec.Policies = append(s.Spec.Policies, policyhubv1.PolicySummary{
				Name: name, Namespace: namespace, Kind: []string{kind, "", kind, "ClusterPolicy"}[i%4],
				Results: policyhubv1.ResultCounts{Pass: pass, Fail: fail, Warn: fail, Error: -pass, Skip: blocked},
				Blocked: blocked, OldestResult: &metav1.Time{Time: now.Add(skew)},
			})
		}
		if seen {
			s.Generation, s.Status.ObservedGeneration = 1, 1
			s.Status.ObservedTime = &metav1.MicroTime{Time: now.Add(-ago)}
		}
		policies := []Policy{{Kind: kind, Namespace: namespace, Name: name}, {Kind: "ClusterPolicy", Name: name}}
		r := ForPolicies(s, policies, now)
		c := r.Counts
		if c.Pass < 0 || c.Fail < 0 || c.Warn < 0 || c.Error < 0 || c.Skip < 0 || r.Blocked < 0 {
			t.Fatalf("negative results %+v, blocked %d", c, r.Blocked)
		}
		if r.Unlisted < 0 || r.Unlisted > len(policies) {
			t.Fatalf("unlisted %d of %d policies", r.Unlisted, len(policies))
		}
		if Age(s, time.Time{}, now) < 0 {
			t.Fatalf("negative age %v", Age(s, time.Time{}, now))
		}
		// By the hub's clock: seen that long ago, stale after three (bounded) heartbeats,
		// whatever the cluster's clock says.
		if at, ok := ObservedAt(s, now); at.After(now) || ok != seen {
			t.Fatalf("observed at %v (%v), after now %v or not as seen (%v)", at, ok, now, seen)
		}
		if seen && Stale(s, time.Time{}, now) != (ago >= staleAfter*Heartbeat(s)) {
			t.Fatalf("seen %v ago, heartbeat %v: stale %v", ago, Heartbeat(s), Stale(s, time.Time{}, now))
		}
	})
}
