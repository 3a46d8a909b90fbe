package e2e

import (
	"testing"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// A black-holed cluster (its endpoint accepts connections and never answers, the most common real
// outage) in the placement leaves the other cluster's convergence unaffected, is shown Failed
// with "no answer within" its probe timeout, and recovers by itself when it answers again.
func TestHubBlackHoledClusterCostsTheOthersNothing(t *testing.T) {
	testDarkCluster(t, "dark-blackhole", darkClusterCase{
		endpoint: func(t *testing.T) string {
			hole, err := fleet.StartBlackHole()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = hole.Close() })
			return hole.URL()
		},
		reason: "no answer within 2s", // the e2e hub's probe timeout
	})
}
