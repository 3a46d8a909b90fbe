package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/work"
)

// One declaration, each cluster's Kyverno: a FleetPolicy of a policies.kyverno.io/v1
// ValidatingPolicy placed on a Kyverno 1.16 cluster (which serves the CEL kinds only as v1beta1)
// and a Kyverno 1.19 cluster. The first gets a v1beta1 object, the second a v1 one; both are
// Synced and in force (Kyverno's readiness read from either), and both clusters' Kyverno refuses
// a violating ConfigMap. Both versions are served by one CRD whose storage is v1alpha1, so what
// tells the version the hub wrote is its managed fields entry (the apiVersion of its apply).
func TestHubRendersTheServedPolicyVersion(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "served-version-e2e", "e2e-served-version"
	clusters := map[string]string{kyverno116Cluster: "v1beta1", "cluster-1": "v1"}
	for cluster := range clusters {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(cluster).Config), ns)
	}
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [%s, cluster-1]}
  template:
    apiVersion: policies.kyverno.io/v1
    kind: ValidatingPolicy
    spec: %s
`, name, kyverno116Cluster, marshalJSON(teamConfigMapPolicySpec("Deny", ns))))
	fp := waitFleetPolicy(t, name, "Synced and in force in both clusters", allInForce)
	if len(fp.Clusters) != 2 {
		t.Fatalf("status has %d clusters, want 2: %+v", len(fp.Clusters), fp.Clusters)
	}

	for cluster, version := range clusters {
		c := directClient(t, fleetOf(t).Cluster(cluster).Config)
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(schema.GroupVersionKind{Group: "policies.kyverno.io", Version: version, Kind: "ValidatingPolicy"})
		if err := c.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
			t.Fatalf("%s: read the ValidatingPolicy at %s: %v", cluster, version, err)
		}
		if got := appliedAs(live); got != "policies.kyverno.io/"+version {
			t.Errorf("%s: the hub applied the ValidatingPolicy as %q, want policies.kyverno.io/%s", cluster, got, version)
		}
		if msg, _, _ := unstructured.NestedSlice(live.Object, "spec", "validations"); len(msg) != 1 {
			t.Errorf("%s: spec.validations = %v, want the template's", cluster, msg)
		}
		eventually(t, 30*time.Second, 500*time.Millisecond, cluster+"'s Kyverno refuses a ConfigMap without a team label", func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-team"}}
			err := c.Create(ctx, cm, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "ConfigMaps need a team label") {
				return fmt.Errorf("dry-run create: %v", err)
			}
			return nil
		})
	}
	// What makes the render necessary: Kyverno 1.16's cluster has no v1 to write to.
	c116 := directClient(t, fleetOf(t).Cluster(kyverno116Cluster).Config)
	v1 := &unstructured.Unstructured{}
	v1.SetGroupVersionKind(schema.GroupVersionKind{Group: "policies.kyverno.io", Version: "v1", Kind: "ValidatingPolicy"})
	if err := c116.Get(ctx, client.ObjectKey{Name: name}, v1); !meta.IsNoMatchError(err) {
		t.Errorf("%s serves policies.kyverno.io/v1 ValidatingPolicy (read: %v): not the Kyverno 1.16 this test needs", kyverno116Cluster, err)
	}
}

// teamConfigMapPolicySpec is the spec of a ValidatingPolicy whose validationAction is action: a
// ConfigMap in namespace needs a team label.
func teamConfigMapPolicySpec(action, namespace string) map[string]any {
	return map[string]any{
		"validationActions": []any{action},
		"matchConstraints": map[string]any{
			"resourceRules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"},
				"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"}}},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": namespace}},
		},
		"validations": []any{map[string]any{
			"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
			"message":    "ConfigMaps need a team label",
		}},
	}
}

// appliedAs is the apiVersion of the hub's server-side apply of obj, from its managed fields.
func appliedAs(obj *unstructured.Unstructured) string {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == work.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return f.APIVersion
		}
	}
	return ""
}
