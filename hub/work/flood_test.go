package work

import (
	"fmt"
	"strings"
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// A flooded cluster's pass lists only what may claim to be its declarations': by their names in
// the source-name label, and the objects without one only when a name cannot be a label value.
func TestClaimants(t *testing.T) {
	long := strings.Repeat("n", 64)
	for _, tc := range []struct {
		name    string
		sources []string
		want    string
	}{
		{"names", []string{"FleetPolicy/b", "ApplicationPolicy/team-a/a"}, "[policyhub.io/managed-by=hub,policyhub.io/source-name in (a,b)]"},
		{"a name too long for a label", []string{"PolicySet/" + long}, "[policyhub.io/managed-by=hub,!policyhub.io/source-name]"},
		{"both", []string{"FleetPolicy/b", "PolicySet/" + long},
			"[policyhub.io/managed-by=hub,policyhub.io/source-name in (b) policyhub.io/managed-by=hub,!policyhub.io/source-name]"},
		{"none", nil, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sources := map[string]bool{}
			for _, s := range tc.sources {
				sources[s] = true
			}
			selectors, err := claimants("hub", sources)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(selectors); got != tc.want {
				t.Errorf("selectors %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := claimants("not a label", map[string]bool{"FleetPolicy/a": true}); err == nil {
		t.Error("a hub id that is no label value selected something")
	}
}

// Without a watch, a flooded cluster's worker asks Kyverno again, at its retries, about the
// declarations it has not confirmed yet; a cached cluster's waits for the watch.
func TestFloodedWorkerRetriesUnconfirmed(t *testing.T) {
	ws, w := budgetWorkers(t, 10)
	synced := Result{DeclarationResult: DeclarationResult{Phase: policyhubv1.ClusterPhaseSynced}}
	ws.mu.Lock()
	for _, source := range []string{"confirmed", "unconfirmed"} {
		w.wants[source] = wanted{decl: Declaration{Source: source, Objects: policies(1)}}
		w.results[source] = synced
	}
	w.awaiting["unconfirmed"] = map[plan.Key]bool{plan.KeyOf(policies(1)[0]): true}
	ws.mu.Unlock()
	ws.markFailed(w)
	if got := ws.takeDirtySources(w); len(got) != 0 {
		t.Errorf("a cached cluster retried %v", got)
	}
	ws.mu.Lock()
	w.flooded = true
	ws.mu.Unlock()
	ws.markFailed(w)
	if got := ws.takeDirtySources(w); fmt.Sprint(got) != "[unconfirmed]" {
		t.Errorf("a flooded cluster retried %v, want the unconfirmed declaration", got)
	}
}
