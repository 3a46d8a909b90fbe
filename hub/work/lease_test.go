package work

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// A writer may trust its cache's view of policyhub's writes only when no other writer has held
// the Lease since its own last release; everything else means "read the cluster again".
func TestLeaseObserverAlone(t *testing.T) {
	released := &resourcelock.LeaderElectionRecord{HolderIdentity: "", LeaderTransitions: 7}
	for _, tc := range []struct {
		name     string
		released *resourcelock.LeaderElectionRecord // what this process left at its last release
		found    *resourcelock.LeaderElectionRecord // what it finds before acquiring
		want     bool
	}{
		{"never held by this process", nil, &resourcelock.LeaderElectionRecord{LeaderTransitions: 7}, false},
		{"no Lease yet", released, nil, false},
		{"untouched since the release", released, &resourcelock.LeaderElectionRecord{LeaderTransitions: 7}, true},
		{"another writer held it since", released, &resourcelock.LeaderElectionRecord{LeaderTransitions: 8}, false},
		{"another writer holds it", released, &resourcelock.LeaderElectionRecord{HolderIdentity: "hub-b", LeaderTransitions: 7}, false},
		{"still ours (a release that failed was forgotten)", &resourcelock.LeaderElectionRecord{HolderIdentity: "hub-a", LeaderTransitions: 7}, &resourcelock.LeaderElectionRecord{HolderIdentity: "hub-a", LeaderTransitions: 7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newLeaseObserver()
			if tc.released != nil {
				o.rememberRelease("cluster-1", tc.released)
			}
			if got := o.alone("cluster-1", "hub-a", tc.found); got != tc.want {
				t.Errorf("alone = %v, want %v", got, tc.want)
			}
			if o.alone("cluster-2", "hub-a", tc.found) {
				t.Error("alone in a cluster this process never released")
			}
		})
	}
}

// A Lease is taken from another writer only when that writer is known dead (a replica of this
// hub whose membership ran out) or was seen unrenewed for longer than the Lease's duration; a
// live or unknown holder (another hub, the CLI) keeps it until then.
func TestJudgeHolder(t *testing.T) {
	dead := func(holder string) bool { return holder == "hub/replica-dead" }
	for _, tc := range []struct {
		name      string
		holder    string
		dead      func(string) bool
		unchanged time.Duration
		want      releaseVerdict
	}{
		{"free", "", dead, time.Hour, keepHolder},
		{"ours", "hub/me", dead, time.Hour, keepHolder},
		{"dead replica, first sighting", "hub/replica-dead", dead, 0, releaseDead},
		{"live replica, first sighting", "hub/replica-live", dead, 0, keepHolder},
		{"live replica, unrenewed for longer than its duration", "hub/replica-live", dead, 16 * time.Second, releaseExpired},
		{"unknown to membership, fresh", "kubectl-policyhub/alice", dead, 10 * time.Second, keepHolder},
		{"unknown to membership, expired", "kubectl-policyhub/alice", dead, 16 * time.Second, releaseExpired},
		{"another hub's replica, fresh", "other/replica-0", dead, 0, keepHolder},
		{"no membership (a single hub, the CLI), fresh", "hub/replica-dead", nil, 0, keepHolder},
		{"no membership, expired", "hub/replica-dead", nil, 16 * time.Second, releaseExpired},
		{"exactly its duration is not expired", "hub/replica-live", dead, 15 * time.Second, keepHolder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeHolder(tc.holder, "hub/me", tc.dead, tc.unchanged, 15*time.Second); got != tc.want {
				t.Errorf("judgeHolder = %v, want %v", got, tc.want)
			}
		})
	}
}

// A record's age counts from this process's first sighting of its resourceVersion: a renewal
// (a new resourceVersion) starts it again, so a renewing holder never looks expired.
func TestLeaseObserverUnchangedFor(t *testing.T) {
	o := newLeaseObserver()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		rv   string
		at   time.Duration
		want time.Duration
	}{
		{"1", 0, 0},
		{"1", 10 * time.Second, 10 * time.Second},
		{"2", 12 * time.Second, 0}, // renewed: the resourceVersion changed
		{"2", 30 * time.Second, 18 * time.Second},
	} {
		if got := o.unchangedFor("c", step.rv, t0.Add(step.at)); got != step.want {
			t.Errorf("rv %s at %s: unchangedFor = %s, want %s", step.rv, step.at, got, step.want)
		}
	}
	if got := o.unchangedFor("other", "2", t0.Add(30*time.Second)); got != 0 {
		t.Errorf("another cluster's record: unchangedFor = %s, want 0", got)
	}
}
