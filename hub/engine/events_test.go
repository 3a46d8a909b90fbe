package engine

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// Events say what happened: one Normal Event for the clusters that synced, a Warning per cluster
// in trouble, and nothing for a cluster whose result has not come yet (Pending) or did not change.
func TestEmitSyncEvents(t *testing.T) {
	result := func(phase policyhubv1.ClusterPhase, msg string) *work.DeclarationResult {
		return &work.DeclarationResult{Phase: phase, Message: msg}
	}
	before := []policyhubv1.ClusterStatus{{Name: "same", Phase: policyhubv1.ClusterPhaseSynced}}
	outcomes := []Outcome{
		{Cluster: "new", Result: result(policyhubv1.ClusterPhaseSynced, "applied 1"), Wrote: true},
		{Cluster: "same", Result: result(policyhubv1.ClusterPhaseSynced, "unchanged 1")},
		{Cluster: "slow", Pending: true, Result: result(policyhubv1.ClusterPhasePending, "waiting for the cluster's worker")},
		{Cluster: "dark", Result: result(policyhubv1.ClusterPhaseFailed, "unreachable: no answer within 5s")},
	}
	recorder := events.NewFakeRecorder(10)
	emitSyncEvents(recorder, &policyhubv1.FleetPolicy{}, before, outcomes)
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	want := []string{"Warning Failed dark: unreachable: no answer within 5s", "Normal Synced new (applied 1)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
