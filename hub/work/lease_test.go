package work

import (
	"testing"

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
