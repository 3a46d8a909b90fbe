package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An Enforce ClusterPolicy applied through the gateway makes the managed cluster's real Kyverno
// refuse a Deployment using nginx:latest, on create and on a server-side dry-run, with Kyverno's
// message; a pinned image is still admitted.
func TestKyvernoEnforcePolicyThroughGatewayDeniesLatestTag(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	const ns = "enforce-e2e"
	cluster := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, cluster, ns)

	policy := latestTagPolicy(t, "e2e-disallow-latest-enforce", ns, "Enforce")
	apply(ctx, t, gatewayClient(t, "cluster-1"), policy)
	t.Cleanup(func() { _ = gatewayClient(t, "cluster-1").Delete(ctx, policy) })

	latest := deployment(ns, "web-latest", "nginx:latest")
	// Kyverno takes a few seconds to program its webhook for a new policy; a server-side dry-run
	// persists nothing, so it is safe to poll with.
	var denial error
	eventually(t, 90*time.Second, time.Second, "Kyverno denies nginx:latest on dry-run", func() error {
		denial = cluster.Create(ctx, latest.DeepCopy(), client.DryRunAll)
		if denial == nil {
			return fmt.Errorf("a dry-run create of %s/%s was admitted", ns, latest.Name)
		}
		return nil
	})
	assertKyvernoDenial(t, "dry-run create", denial, ns, policy.GetName())

	err := cluster.Create(ctx, latest.DeepCopy())
	assertKyvernoDenial(t, "create", err, ns, policy.GetName())
	if err := cluster.Get(ctx, types.NamespacedName{Namespace: ns, Name: latest.Name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the denied Deployment exists anyway (Get: %v)", err)
	}

	pinned := deployment(ns, "web-pinned", "nginx:1.27.3")
	if err := cluster.Create(ctx, pinned); err != nil {
		t.Errorf("a Deployment with a pinned image was refused: %v", err)
	}
}

// assertKyvernoDenial checks that err is Kyverno's admission denial naming the policy, the rule's
// message and the resource.
func assertKyvernoDenial(t *testing.T, what string, err error, namespace, policy string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: admitted, want Kyverno's denial", what)
	}
	msg := err.Error()
	for _, want := range []string{
		`admission webhook "validate.kyverno.svc-fail" denied the request`,
		"resource Deployment/" + namespace + "/web-latest was blocked due to the following policies",
		policy,
		"require-pinned-image",
		"the image tag latest is not allowed: pin a version",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: denial %q lacks %q", what, msg, want)
		}
	}
}

// latestTagPolicy is a Kyverno ClusterPolicy that refuses (Enforce) or reports (Audit) Deployments
// in namespace whose image is tagged latest.
func latestTagPolicy(t *testing.T, name, namespace, failureAction string) *unstructured.Unstructured {
	t.Helper()
	return object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
  annotations:
    policies.kyverno.io/severity: medium
    policies.kyverno.io/category: Best Practices
spec:
  background: true
  rules:
  - name: require-pinned-image
    match:
      any:
      - resources:
          kinds: [Deployment]
          namespaces: [%s]
    validate:
      failureAction: %s
      message: "the image tag latest is not allowed: pin a version"
      pattern:
        spec:
          template:
            spec:
              containers:
              - image: "!*:latest"
`, name, namespace, failureAction))
}

func deployment(namespace, name, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
			},
		},
	}
}
