package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A Gatekeeper template and Constraint placed on a cluster that runs no Gatekeeper (kubernetesCluster)
// are Unsupported, naming the engine, and nothing is sent there; its agent reports neither
// Gatekeeper nor Kyverno.
func TestGatekeeperDeclarationOnAClusterWithoutGatekeeperIsUnsupported(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, kubernetesCluster)
	const kind = "E2eNoGatekeeperTeam"
	template := strings.Replace(gatekeeperRegoTemplate("gk-none-template", kind), gatekeeperCluster, kubernetesCluster, 1)
	constraint := strings.Replace(gatekeeperConstraint("gk-none-team", "Enforce", kind, "default"), gatekeeperCluster, kubernetesCluster, 1)
	createFleetPolicy(t, template)
	createFleetPolicy(t, constraint)
	for _, name := range []string{"gk-none-template", "gk-none-team"} {
		fp := waitFleetPolicy(t, name, "Unsupported in "+kubernetesCluster, wantPhases(map[string]policyhubv1.ClusterPhase{kubernetesCluster: policyhubv1.ClusterPhaseUnsupported}))
		s := clusterStatus(fp, kubernetesCluster)
		if !strings.Contains(s.Message, "does not run the Gatekeeper engine") || s.Actions.Created != 0 {
			t.Errorf("%s in %s: %q, actions %+v; want the engine named and nothing sent", name, kubernetesCluster, s.Message, s.Actions)
		}
	}
	eventually(t, 60*time.Second, 500*time.Millisecond, "the agent of "+kubernetesCluster+" reports neither Gatekeeper nor Kyverno", func() error {
		summary, err := hubSummaryOf(t, kubernetesCluster)
		if err != nil {
			return err
		}
		// Kubernetes' own admission policies may be named: the API server runs them everywhere.
		if e := summary.Spec.Engine; slices.Contains(e.Engines, policyhubv1.EngineGatekeeper) || slices.Contains(e.Engines, policyhubv1.EngineKyverno) || e.Gatekeeper != nil || e.KyvernoWebhooks {
			return fmt.Errorf("engine %+v", e)
		}
		return nil
	})
}
