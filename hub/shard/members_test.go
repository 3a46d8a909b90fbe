package shard

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func replicaLease(hubID, replica, rv, holder string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: policyhubv1.ReplicaLeaseName(hubID, replica), ResourceVersion: rv,
			Labels: map[string]string{policyhubv1.LabelReplicaOf: hubID}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: ptr.To(seconds)},
	}
}

// Liveness is judged by the hub's clock: a renewal the hub sees counts from when it saw it, a
// Lease found on start from its own renewTime (never later than now); a released Lease, an
// expired one, another hub's and a Lease claiming a day are handled.
func TestMembersJudgeLivenessByTheHubsClock(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	m := NewMembers("policyhub", func() time.Time { return now })
	live := func() []string { l, _ := m.Live(); return l }
	notified := 0
	m.OnChange(func() { notified++ })
	// news checks how many changes were announced since its last call.
	news := func(want int, what string) {
		t.Helper()
		if notified != want {
			t.Errorf("%s: %d changes announced, want %d", what, notified, want)
		}
		notified = 0
	}

	m.Seen(replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now.Add(-5*time.Second), 15))
	m.Seen(replicaLease("policyhub", "hub-1", "1", "policyhub/hub-1-a", now.Add(time.Hour), 15)) // clock ahead: counts as now
	m.Seen(replicaLease("policyhub", "hub-2", "1", "policyhub/hub-2-a", now.Add(-20*time.Second), 15))
	m.Seen(replicaLease("other", "hub-9", "1", "other/hub-9", now, 15))
	m.Seen(replicaLease("policyhub", "hub-3", "1", "", now, 15)) // released on a clean stop
	if got := live(); !slices.Equal(got, []string{"hub-0", "hub-1"}) {
		t.Fatalf("live = %v, want [hub-0 hub-1]", got)
	}
	news(2, "two live replicas found") // the expired, released and foreign Leases are no news
	now = now.Add(12 * time.Second)
	// hub-0 renewed (a new resourceVersion), hub-1 only resynced (the same one).
	m.Seen(replicaLease("policyhub", "hub-0", "2", "policyhub/hub-0-a", now, 15))
	m.Seen(replicaLease("policyhub", "hub-1", "1", "policyhub/hub-1-a", now.Add(time.Hour), 15))
	if got := live(); !slices.Equal(got, []string{"hub-0", "hub-1"}) {
		t.Fatalf("after 12s: live = %v, want [hub-0 hub-1]", got)
	}
	// hub-0's turn had run out (seen 5 s before start, 15 s long): its renewal is news; hub-1's
	// resync is not.
	news(1, "hub-0 renewing after its turn ran out, hub-1 resynced")
	m.Seen(replicaLease("policyhub", "hub-0", "2b", "policyhub/hub-0-a", now, 15))
	news(0, "a renewal of a live replica")
	now = now.Add(4 * time.Second)
	if got := live(); !slices.Equal(got, []string{"hub-0"}) {
		t.Fatalf("16s after hub-1 was last seen renewing: live = %v, want [hub-0]", got)
	}
	// A Lease claiming a day lasts no longer than maxLeaseDuration after its last renewal.
	m.Seen(replicaLease("policyhub", "hub-0", "3", "policyhub/hub-0-a", now, 86400))
	now = now.Add(maxLeaseDuration + time.Second)
	if got := live(); len(got) != 0 {
		t.Fatalf("past maxLeaseDuration: live = %v, want none", got)
	}
	news(0, "expiries (Live tells them; nothing announces them)")
	m.Seen(replicaLease("policyhub", "hub-0", "4", "policyhub/hub-0-a", now, 15))
	news(1, "an expired replica renewing")
	m.Seen(replicaLease("policyhub", "hub-0", "5", "", now, 15))
	news(1, "a replica releasing its Lease")
	m.Gone(policyhubv1.ReplicaLeaseName("policyhub", "hub-0"))
	if got := live(); len(got) != 0 {
		t.Fatalf("after the Lease was deleted: live = %v, want none", got)
	}
}

func TestLiveAtTrustsTheLeasesOwnRenewTime(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	leases := []coordinationv1.Lease{
		*replicaLease("policyhub", "hub-1", "1", "policyhub/hub-1-a", now.Add(-5*time.Second), 15),
		*replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now.Add(-14*time.Second), 15),
		*replicaLease("policyhub", "hub-2", "1", "policyhub/hub-2-a", now.Add(-16*time.Second), 15), // expired
		*replicaLease("policyhub", "hub-3", "1", "", now, 15),                                       // released
		*replicaLease("policyhub", "hub-4", "1", "policyhub/hub-4-a", now.Add(-time.Hour), 86400),   // claims a day
		*replicaLease("other", "hub-5", "1", "other/hub-5-a", now, 15),                              // another hub's
	}
	if got := LiveAt("policyhub", leases, now); !slices.Equal(got, []string{"hub-0", "hub-1"}) {
		t.Errorf("live = %v, want [hub-0 hub-1]", got)
	}
}

// A holder identity is dead once membership judges its replica gone by the hub's clock: its
// Lease ran out, was released, deleted or taken by a restarted process; an identity never seen
// holding this hub's replica Lease (another hub's, the CLI's) is not judged at all.
func TestMembersDead(t *testing.T) {
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		leases   func(now time.Time) []*coordinationv1.Lease // seen at start, in order
		gone     bool                                        // hub-0's Lease deleted after
		after    time.Duration                               // when Dead is asked
		identity string
		want     bool
	}{
		{"live", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15)}
		}, false, 10 * time.Second, "policyhub/hub-0-a", false},
		{"ran out unrenewed", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15)}
		}, false, 16 * time.Second, "policyhub/hub-0-a", true},
		{"found already expired on start", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now.Add(-20*time.Second), 15)}
		}, false, 0, "policyhub/hub-0-a", true},
		{"released on a clean stop", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{
				replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15),
				replicaLease("policyhub", "hub-0", "2", "", now, 15),
			}
		}, false, 0, "policyhub/hub-0-a", true},
		{"replaced by a restarted process", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{
				replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15),
				replicaLease("policyhub", "hub-0", "2", "policyhub/hub-0-b", now, 15),
			}
		}, false, 0, "policyhub/hub-0-a", true},
		{"the restarted process is live", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{
				replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15),
				replicaLease("policyhub", "hub-0", "2", "policyhub/hub-0-b", now, 15),
			}
		}, false, 0, "policyhub/hub-0-b", false},
		{"its Lease deleted", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15)}
		}, true, 0, "policyhub/hub-0-a", true},
		{"unknown identity (the CLI)", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("policyhub", "hub-0", "1", "policyhub/hub-0-a", now, 15)}
		}, false, time.Hour, "kubectl-policyhub/alice", false},
		{"another hub's replica, expired", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("other", "hub-0", "1", "other/hub-0-a", now.Add(-time.Hour), 15)}
		}, false, time.Hour, "other/hub-0-a", false},
		{"empty holder", func(now time.Time) []*coordinationv1.Lease {
			return []*coordinationv1.Lease{replicaLease("policyhub", "hub-0", "1", "", now.Add(-time.Hour), 15)}
		}, false, time.Hour, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := start
			m := NewMembers("policyhub", func() time.Time { return now })
			for _, l := range tc.leases(now) {
				m.Seen(l)
			}
			if tc.gone {
				m.Gone(policyhubv1.ReplicaLeaseName("policyhub", "hub-0"))
			}
			now = now.Add(tc.after)
			if got := m.Dead(tc.identity); got != tc.want {
				t.Errorf("Dead(%q) = %v, want %v", tc.identity, got, tc.want)
			}
		})
	}
}

// Restarts do not grow what membership remembers without bound: a process last seen holding its
// Lease longer than forgetHolder ago is forgotten (its sync Leases, unrenewed that long, fall to
// the ordinary expiry rule), while the live one stays known.
func TestMembersForgetLongGoneHolders(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	m := NewMembers("policyhub", func() time.Time { return now })
	for i := range 100 {
		m.Seen(replicaLease("policyhub", "hub-0", fmt.Sprint(i), fmt.Sprintf("policyhub/hub-0-%d", i), now, 15))
	}
	if !m.Dead("policyhub/hub-0-0") || m.Dead("policyhub/hub-0-99") {
		t.Fatal("a restarted process is dead and the last one live")
	}
	now = now.Add(forgetHolder + time.Minute)
	m.Seen(replicaLease("policyhub", "hub-0", "100", "policyhub/hub-0-99", now, 15)) // the live one renews
	m.mu.Lock()
	remembered := len(m.holders)
	m.mu.Unlock()
	if remembered != 1 || m.Dead("policyhub/hub-0-99") || m.Dead("policyhub/hub-0-0") {
		t.Errorf("%d processes remembered, want only the live one (forgotten ones are not judged dead)", remembered)
	}
}
