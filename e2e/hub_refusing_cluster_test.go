package e2e

import (
	"testing"

	"github.com/policyhub/policyhub/e2e/fleet"
)

// A cluster that refuses connections in the placement leaves the other cluster's convergence
// unaffected, is shown Failed with "connection refused", and recovers by itself when it answers.
func TestHubRefusingClusterCostsTheOthersNothing(t *testing.T) {
	testDarkCluster(t, "dark-refusing", darkClusterCase{
		endpoint: func(t *testing.T) string {
			url, err := fleet.RefusingURL()
			if err != nil {
				t.Fatal(err)
			}
			return url
		},
		reason: "connection refused",
	})
}
