package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A declaration's status is not written for churn: one more passing Deployment reaches the hub
// (cluster-1's summary) but leaves the FleetPolicy as it was, since pass counts move with every
// agent's summary; the next failure is written, the passes taken along in that one write. The
// FleetPolicy's own watch on the hub's apiserver sees every write.
func TestHubStatusNotWrittenForChurn(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, name = "status-churn", "status-churn-team"
	hub := directClient(t, fleetOf(t).Hub.Config)
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1"))
	// Kyverno reports what it admits once the policy is there.
	waitFleetPolicy(t, name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	// passes waits until cluster-1's summary on the hub counts n passes of the policy: the hub
	// watches summaries, so it has the news.
	passes := func(what string, n int64) {
		t.Helper()
		eventually(t, 3*time.Minute, 500*time.Millisecond, what, func() error {
			s, err := hubSummaryOf(t, "cluster-1")
			if err != nil {
				return err
			}
			for _, p := range s.Spec.Policies {
				if p.Name == name && p.Kind == "ClusterPolicy" {
					if p.Results.Pass < n || p.Results.Fail != 0 {
						return fmt.Errorf("cluster-1's summary counts %+v for the policy", p.Results)
					}
					return nil
				}
			}
			return fmt.Errorf("cluster-1's summary has no results of the policy yet")
		})
	}
	if err := c1.Create(ctx, shopDeployment(ns, "one", "checkout")); err != nil {
		t.Fatal(err)
	}
	passes("one passing Deployment in cluster-1's summary", 1)
	// The status as the hub settled it: Ready for this generation, cluster-1 synced. Writes made
	// before this read are not watched.
	var settled policyhubv1.FleetPolicy
	eventually(t, time.Minute, 200*time.Millisecond, "the status settled", func() error {
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, &settled); err != nil {
			return err
		}
		ready := apimeta.FindStatusCondition(settled.Status.Conditions, policyhubv1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || settled.Status.ObservedGeneration != settled.Generation || settled.Status.Summary.Synced != 1 {
			return fmt.Errorf("ready %+v, summary %+v", ready, settled.Status.Summary)
		}
		return nil
	})
	watcher, err := client.NewWithWatch(fleetOf(t).Hub.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &policyhubv1.FleetPolicyList{}, client.MatchingFields{"metadata.name": name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: settled.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Churn: a second passing Deployment, in the summary the hub watches...
	if err := c1.Create(ctx, shopDeployment(ns, "two", "checkout")); err != nil {
		t.Fatal(err)
	}
	passes("two passing Deployments in cluster-1's summary", 2)
	// ...then a failure, which is worth a write (Kyverno reports it seconds later: the churn's
	// reconcile has long run by then).
	if err := c1.Create(ctx, shopDeployment(ns, "three", "")); err != nil {
		t.Fatal(err)
	}
	// The first write since the settled status is the failure's, with both passes in it.
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the FleetPolicy ended early")
			}
			if ev.Type != watch.Modified {
				continue
			}
			fp, ok := ev.Object.(*policyhubv1.FleetPolicy)
			if !ok {
				t.Fatalf("watch event of %T", ev.Object)
			}
			if r := fp.Status.Summary.Results; r.Fail >= 1 {
				if r.Pass < 2 {
					t.Errorf("the failure was written without the passes taken along: results %+v", r)
				}
				return
			}
			if withoutChurn(fp.Status) == withoutChurn(settled.Status) {
				t.Fatalf("the FleetPolicy's status was written (resourceVersion %s) with only its pass counts changed (%+v): a write for churn",
					fp.ResourceVersion, fp.Status.Summary.Results)
			}
			// Something else changed (a cluster's phase, a condition): not churn; the next write.
			settled = *fp
		case <-deadline:
			t.Fatal("the failure was never written to the FleetPolicy's status")
		}
	}
}

// withoutChurn is status as JSON without the counts that move with every summary.
func withoutChurn(status policyhubv1.FleetPolicyStatus) string {
	status.Summary.Results = status.Summary.Results.WithoutChurn()
	out, err := json.Marshal(status)
	if err != nil {
		return err.Error()
	}
	return string(out)
}
