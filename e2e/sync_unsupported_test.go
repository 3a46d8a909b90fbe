package e2e

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A kind the cluster does not serve makes the declaration Unsupported there, naming what is
// missing, and sends nothing for it; another declaration in the same sync is synced.
func TestSyncUnsupportedKindNamesWhatIsMissing(t *testing.T) {
	ctx := testContext(t)
	s := newSyncer(t)
	future, futureSource := renderFleetPolicy(t, "e2e-unsupported", `
apiVersion: policies.kyverno.io/v9
kind: ValidatingPolicy
spec:
  validationActions: [Audit]
  validations:
  - expression: "true"
`, nil)
	ok, okSource := renderFleetPolicy(t, "e2e-unsupported-neighbour", auditTemplate("unsupported"), nil)
	cluster := gatewayCluster(t, "cluster-1")
	res := s.Sync(ctx, cluster, []work.Declaration{
		{Source: futureSource, Objects: []*unstructured.Unstructured{future}, Prune: true},
		{Source: okSource, Objects: []*unstructured.Unstructured{ok}, Prune: true},
	})
	t.Cleanup(func() { s.Sync(ctx, cluster, []work.Declaration{{Source: okSource, Prune: true}}) })
	unsupported, synced := res.Declarations[0], res.Declarations[1]
	if unsupported.Phase != policyhubv1.ClusterPhaseUnsupported || !strings.Contains(unsupported.Message, "does not serve policies.kyverno.io/v9 ValidatingPolicy") {
		t.Errorf("unserved kind: phase %s, message %q", unsupported.Phase, unsupported.Message)
	}
	if synced.Phase != policyhubv1.ClusterPhaseSynced || synced.Actions.Created != 1 {
		t.Errorf("the other declaration: phase %s (%s), actions %+v", synced.Phase, synced.Message, synced.Actions)
	}
}
