package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A policies.kyverno.io/v1 policy that uses a field Kyverno 1.16's v1beta1 does not have (a
// MutatingPolicy's spec.mutations[].patchType and applyConfiguration: 1.16's mutations are
// {expression, target}) is Unsupported in the Kyverno 1.16 cluster, the message naming the fields,
// and nothing of it is sent: no MutatingPolicy exists there, rather than one the apiserver
// stripped of its mutations.
func TestHubRefusesFieldsKyverno116Lacks(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const name = "e2e-kyverno116-missing-field"
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [%s]}
  allow: [Mutate]
  template:
    apiVersion: policies.kyverno.io/v1
    kind: MutatingPolicy
    spec: %s
`, name, kyverno116Cluster, marshalJSON(map[string]any{
		"matchConstraints": teamConfigMapPolicySpec("Audit", "kyverno116-missing-field")["matchConstraints"],
		"mutations": []any{map[string]any{
			"patchType":          "ApplyConfiguration",
			"applyConfiguration": map[string]any{"expression": `Object{metadata: Object.metadata{labels: {"team": "none"}}}`},
		}},
	})))
	fp := waitFleetPolicy(t, name, "Unsupported in "+kyverno116Cluster, wantPhases(map[string]policyhubv1.ClusterPhase{kyverno116Cluster: policyhubv1.ClusterPhaseUnsupported}))
	msg := clusterStatus(fp, kyverno116Cluster).Message
	for _, want := range []string{"only as v1beta1 (Kyverno 1.16)", "no field spec.mutations[].applyConfiguration, spec.mutations[].patchType", "nothing was sent"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(schema.GroupVersionKind{Group: "policies.kyverno.io", Version: "v1beta1", Kind: "MutatingPolicy"})
	err := directClient(t, fleetOf(t).Cluster(kyverno116Cluster).Config).Get(ctx, client.ObjectKey{Name: name}, live)
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s holds MutatingPolicy %s (read: %v): nothing should have been sent", kyverno116Cluster, name, err)
	}
}
