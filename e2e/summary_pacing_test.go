package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
	"github.com/policyhub/policyhub/hub/controllers"
	"github.com/policyhub/policyhub/hub/placement"
)

// The hub publishes each agent's pacing in its summary's status: a real agent's summary, on the
// real CRD, carries its share of the default budgets for the whole fleet's size (cluster-gateway's
// credential Secrets), and kubectl policyhub clusters shows it. Changing the fleet's size across a
// step is not practical here; that path (every summary woken once) is hub/controllers'
// TestFleetPacingWakesOnlyOnAStep.
//
// Serial, as the only test whose hub publishes pacing: its agents' floors (a 1m heartbeat) would
// slow the parallel tests' sub-minute heartbeats, which their hubs (publishing none) restore.
func TestSummaryCarriesPublishedPacing(t *testing.T) {
	startHub(t, time.Hour, func(o *controllers.HubOptions) { o.Pacing = &controllers.PacingOptions{} })
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)

	var published policyhubv1.SummaryPacing
	eventually(t, 2*time.Minute, 500*time.Millisecond, "cluster-1's summary carries the pacing for the fleet's size", func() error {
		s, err := hubSummaryOf(t, "cluster-1")
		if err != nil {
			return err
		}
		if ready := apimeta.FindStatusCondition(s.Status.Conditions, policyhubv1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("the summary is not aggregated yet: %+v", ready)
		}
		if s.Status.Pacing == nil {
			return fmt.Errorf("status %+v publishes no pacing", s.Status)
		}
		published = *s.Status.Pacing
		secrets, err := placement.CredentialSecrets(ctx, hub, fleetOf(t).SecretNamespace)
		if err != nil {
			return err
		}
		// Clusters other tests left behind (aliases) count too: the fleet's size is the hub's
		// inventory, whatever it holds, within the step the published intervals are for.
		want := policyhubv1.PacingFor(len(secrets), 0, 0)
		if published.PushInterval != want.PushInterval || published.HeartbeatInterval != want.HeartbeatInterval {
			return fmt.Errorf("published %+v, want %+v (%d clusters, the default budgets)", published, want, len(secrets))
		}
		return nil
	})
	// The fleet's five managed clusters at least, and the intervals are those of the size said.
	if sized := policyhubv1.PacingFor(int(published.Clusters), 0, 0); published.Clusters < 5 ||
		sized.PushInterval != published.PushInterval || sized.HeartbeatInterval != published.HeartbeatInterval {
		t.Errorf("published %+v: sized for %d clusters, whose pacing is %+v", published, published.Clusters, sized)
	}
	// A fleet this small is paced at the floors: the agents' own defaults.
	if published.PushInterval.Duration != policyhubv1.MinPushInterval || published.HeartbeatInterval.Duration != policyhubv1.MinHeartbeatInterval {
		t.Errorf("published %+v for a fleet of %d, want %s and %s", published, published.Clusters, policyhubv1.MinPushInterval, policyhubv1.MinHeartbeatInterval)
	}

	code, out, errOut := cliReadRun(t, "clusters", "cluster-1", "-o", "json")
	if code != app.ExitOK {
		t.Fatalf("clusters: exit %d, stderr %q\n%s", code, errOut, out)
	}
	var report struct {
		Clusters []struct {
			Summary *struct {
				Pacing *struct {
					PushInterval      string `json:"pushInterval"`
					HeartbeatInterval string `json:"heartbeatInterval"`
				} `json:"pacing"`
			} `json:"summary"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("clusters -o json: %v\n%s", err, out)
	}
	if len(report.Clusters) != 1 || report.Clusters[0].Summary == nil || report.Clusters[0].Summary.Pacing == nil ||
		report.Clusters[0].Summary.Pacing.PushInterval != "10s" || report.Clusters[0].Summary.Pacing.HeartbeatInterval != "1m0s" {
		t.Errorf("clusters -o json shows no pacing of 10s and 1m0s:\n%s", out)
	}
}
