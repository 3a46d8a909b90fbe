package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster whose agent stops sending heartbeats: after three missed heartbeats its results are
// marked stale in the FleetPolicy's status and the summary says why, with no further event.
func TestStaleSummaryMarksResultsStale(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	agentHubConfig(t, "cluster-1") // the cluster's hub namespace
	const name = "agent-stale"
	createFleetPolicy(t, fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: FleetPolicy
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1]}
  template: {apiVersion: kyverno.io/v1, kind: ClusterPolicy, spec: %s}
`, name, indentedSpec(name)))
	waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	// The last summary a (now silent) agent sent, with a 2s heartbeat.
	admin := directClient(t, testFleet.Hub.Config)
	last := summaryFor("cluster-1", "cluster-1")
	last.Spec.HeartbeatInterval = &metav1.Duration{Duration: 2 * time.Second}
	last.Spec.Policies = []policyhubv1.PolicySummary{{Name: name, Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}}}
	if err := applySummary(ctx, admin, last, "stale-test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteSummary(t, "cluster-1") })
	generated := last.Spec.GeneratedAt.Time.Truncate(time.Second) // as stored: to the second
	waitResults(t, name, "the summary's results, fresh", func(fp *policyhubv1.FleetPolicy) error {
		if s := clusterStatus(fp, "cluster-1"); s == nil || s.Results == nil || s.Results.Fail != 2 || s.Stale {
			return fmt.Errorf("cluster-1: %+v", s)
		}
		return nil
	})
	fp := waitResults(t, name, "the results marked stale", func(fp *policyhubv1.FleetPolicy) error {
		if s := clusterStatus(fp, "cluster-1"); s == nil || !s.Stale {
			return fmt.Errorf("cluster-1: %+v", s)
		}
		return nil
	})
	if waited := time.Since(generated); waited < 6*time.Second {
		t.Errorf("stale %s after the summary was generated, before three heartbeats of 2s", waited)
	}
	if s := clusterStatus(fp, "cluster-1"); s.Results == nil || s.Results.Fail != 2 {
		t.Errorf("stale results must still show the last known counts: %+v", s)
	}
	eventually(t, 10*time.Second, 200*time.Millisecond, "the summary's Ready condition says Stale", func() error {
		s := &policyhubv1.PolicyReportSummary{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(last), s); err != nil {
			return err
		}
		for _, c := range s.Status.Conditions {
			if c.Type == policyhubv1.ConditionReady && c.Reason == "Stale" && c.Status == metav1.ConditionFalse {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", s.Status.Conditions)
	})
}
