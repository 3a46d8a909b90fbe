package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A FleetPolicy carrying a Kubernetes MutatingAdmissionPolicy (its spec.allow lists Mutate) on
// the cluster that runs no engine but its API server: the hub ships it with a
// MutatingAdmissionPolicyBinding of its own; the API server itself sets the label on a new
// ConfigMap; a deleted binding is restored; deleting the FleetPolicy removes both. Without
// spec.allow Mutate the declaration is Stalled and nothing reaches the cluster.
func TestMutatingAdmissionPolicyFleetPolicyMutatesThroughTheAPIServer(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, name = "map-team", "map-team"
	c5 := directClient(t, fleetOf(t).Cluster(kubernetesCluster).Config)
	createNamespace(ctx, t, c5, ns)
	manifest := func(allow string) string {
		return fmt.Sprintf(`
metadata: {name: %s}
spec:
%s  placement: {clusters: [%s]}
  template:
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicy
    spec:
      failurePolicy: Fail
      reinvocationPolicy: Never
      matchConstraints:
        namespaceSelector:
          matchLabels: {kubernetes.io/metadata.name: %s}
        resourceRules:
        - apiGroups: [""]
          apiVersions: [v1]
          operations: [CREATE]
          resources: [configmaps]
      mutations:
      - patchType: ApplyConfiguration
        applyConfiguration:
          expression: "Object{metadata: Object.metadata{labels: {'team': 'platform'}}}"
`, name, allow, kubernetesCluster, ns)
	}
	policy := &unstructured.Unstructured{}
	policy.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicy"})
	binding := &unstructured.Unstructured{}
	binding.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicyBinding"})

	// Not allowed to mutate: Stalled with the reason, nothing sent.
	createFleetPolicy(t, manifest(""))
	waitFleetPolicy(t, name, "Stalled: a mutation needs spec.allow Mutate", func(fp *fleetView) error {
		if c := findCondition(fp, policyhubv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %+v", fp.Status.Conditions)
		}
		return nil
	})
	if err := c5.Get(ctx, client.ObjectKey{Name: name}, policy); !apierrors.IsNotFound(err) {
		t.Fatalf("a MutatingAdmissionPolicy reached %s without spec.allow Mutate (%v)", kubernetesCluster, err)
	}

	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) {
		fp.Spec.Allow = []policyhubv1.PolicyCapability{policyhubv1.CapabilityMutate}
	})
	waitFleetPolicy(t, name, "synced in "+kubernetesCluster, wantPhases(map[string]policyhubv1.ClusterPhase{kubernetesCluster: "Synced"}))
	if err := c5.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil || binding.GetLabels()[policyhubv1.LabelManagedBy] == "" {
		t.Fatalf("binding %s in %s: %v, labels %v: want it owned by the hub", name, kubernetesCluster, err, binding.GetLabels())
	}
	mutated := func(what string) {
		t.Helper()
		eventually(t, 30*time.Second, 200*time.Millisecond, what, func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "mutated-"}}
			if err := c5.Create(ctx, cm, client.DryRunAll); err != nil {
				return err
			}
			if cm.Labels["team"] != "platform" {
				return fmt.Errorf("the API server admitted a ConfigMap with labels %v: not mutated", cm.Labels)
			}
			return nil
		})
	}
	mutated("the API server labels a new ConfigMap")

	if err := c5.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, 200*time.Millisecond, "the binding restored", func() error {
		return c5.Get(ctx, client.ObjectKey{Name: name}, binding)
	})
	mutated("the restored binding mutates again")

	deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	for _, obj := range []*unstructured.Unstructured{policy, binding} {
		if err := c5.Get(context.Background(), client.ObjectKey{Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s still in %s after the FleetPolicy was deleted (%v)", obj.GetKind(), name, kubernetesCluster, err)
		}
	}
}
