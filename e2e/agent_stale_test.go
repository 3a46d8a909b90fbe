package e2e

import (
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster whose agent stops sending heartbeats: after three missed heartbeats its results are
// marked stale in the FleetPolicy's status and the summary says why, with no further event.
// Missed by the hub's clock: the cluster's clock runs an hour ahead, so its last summary says it
// was generated an hour from now, and still turns stale three heartbeats after the hub saw it;
// the summary says the cluster's clock is off (ClockSkew), and stays Ready until then.
func TestStaleSummaryMarksResultsStale(t *testing.T) {
	inParallel(t)
	// A cluster of its own on cluster-1's apiserver, whose summary it writes beside the other
	// tests' shared agents.
	const cluster = "agent-stale-summary"
	aliasCluster(t, cluster, "cluster-1")
	startHub(t, time.Hour)
	ctx := testContext(t)
	agentHubConfig(t, cluster) // the cluster's hub namespace
	const name = "agent-stale"
	createFleetPolicy(t, fmt.Sprintf(`
apiVersion: policyhub.io/v1alpha1
kind: FleetPolicy
metadata: {name: %s}
spec:
  placement: {clusters: [%s]}
  template: {apiVersion: kyverno.io/v1, kind: ClusterPolicy, spec: %s}
`, name, cluster, indentedSpec(name)))
	waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{cluster: "Synced"}))

	// The last summary a (now silent) agent sent, with a 2s heartbeat, by a clock an hour ahead.
	admin := directClient(t, fleetOf(t).Hub.Config)
	last := summaryFor(cluster, cluster)
	last.Spec.GeneratedAt = &metav1.Time{Time: time.Now().Add(time.Hour)}
	last.Spec.HeartbeatInterval = &metav1.Duration{Duration: 2 * time.Second}
	last.Spec.Policies = []policyhubv1.PolicySummary{{Name: name, Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2}}}
	if err := applySummary(ctx, admin, last, "stale-test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteSummary(t, cluster) })
	waitResults(t, name, "the summary's results, fresh", func(fp *fleetView) error {
		if s := clusterStatus(fp, cluster); s == nil || s.Results == nil || s.Results.Fail != 2 || s.Stale {
			return fmt.Errorf("%s: %+v", cluster, s)
		}
		return nil
	})
	var seen time.Time // when the hub saw the summary, by its clock
	eventually(t, 10*time.Second, 200*time.Millisecond, "the hub's time of the summary, and the cluster's clock said to be ahead", func() error {
		s := &policyhubv1.PolicyReportSummary{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(last), s); err != nil {
			return err
		}
		if s.Status.ObservedGeneration != s.Generation || s.Status.ObservedTime == nil {
			return fmt.Errorf("status %+v of generation %d", s.Status, s.Generation)
		}
		seen = s.Status.ObservedTime.Time
		if c := apimeta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionClockSkew); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ClockAhead" {
			return fmt.Errorf("ClockSkew %+v", c)
		}
		return nil
	})
	if time.Since(seen) > time.Minute || time.Until(seen) > time.Second {
		t.Errorf("the hub saw the summary at %v, want about now (its own clock, not the cluster's)", seen)
	}
	fp := waitResults(t, name, "the results marked stale, by the hub's clock", func(fp *fleetView) error {
		if s := clusterStatus(fp, cluster); s == nil || !s.Stale {
			return fmt.Errorf("%s: %+v", cluster, s)
		}
		return nil
	})
	if waited := time.Since(seen); waited < 6*time.Second {
		t.Errorf("stale %s after the hub saw the summary, before three heartbeats of 2s", waited)
	}
	if s := clusterStatus(fp, cluster); s.ReportTime == nil || s.ReportTime.Time.After(time.Now()) {
		t.Errorf("report time %v: want when the hub saw the summary, not the cluster's future time", s.ReportTime)
	}
	if s := clusterStatus(fp, cluster); s.Results == nil || s.Results.Fail != 2 {
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
