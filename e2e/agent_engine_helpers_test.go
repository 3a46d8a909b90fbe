package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// kyvernoAdmissionDeployment is the name Kyverno's Helm chart gives its admission controller's
// Deployment (release kyverno), in the fleet's Kyverno namespace.
const kyvernoAdmissionDeployment = "kyverno-admission-controller"

// ensureKyvernoDeployments makes sure the cluster has the Deployments Kyverno's Helm chart makes
// for its admission and reports controllers, shaped as the chart makes them (labels, container
// names, image tag = the running version, args = the processes' exception flags): the fleet runs
// Kyverno as processes, and these Deployments are the signal a real cluster offers. Those the
// test creates are deleted when it ends; ones already there (the fleet's own) are left alone.
func ensureKyvernoDeployments(ctx context.Context, t *testing.T, cluster string) {
	t.Helper()
	c := directClient(t, testFleet.Cluster(cluster).Config)
	for _, d := range []struct{ component, container, image string }{
		{"admission-controller", "kyverno", "reg.kyverno.io/kyverno/kyverno:" + fleet.KyvernoVersion},
		{"reports-controller", "controller", "reg.kyverno.io/kyverno/reports-controller:" + fleet.KyvernoVersion},
	} {
		name := "kyverno-" + d.component
		match := map[string]string{"app.kubernetes.io/component": d.component, "app.kubernetes.io/instance": "kyverno", "app.kubernetes.io/part-of": "kyverno"}
		labels := map[string]string{"app.kubernetes.io/name": name}
		for k, v := range match {
			labels[k] = v
		}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleet.KyvernoNamespace, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: match},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: d.container, Image: d.image, Args: []string{
						"--enablePolicyException=true", "--exceptionNamespace=" + policyhubv1.DefaultExceptionNamespace,
					}}}},
				},
			},
		}
		err := c.Create(ctx, dep)
		if apierrors.IsAlreadyExists(err) {
			t.Logf("%s: Deployment %s/%s is already there: the test uses it", cluster, fleet.KyvernoNamespace, name)
			continue
		}
		if err != nil {
			t.Fatalf("%s: create Deployment %s/%s: %v", cluster, fleet.KyvernoNamespace, name, err)
		}
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), dep); client.IgnoreNotFound(err) != nil {
				t.Errorf("%s: delete Deployment %s/%s: %v", cluster, fleet.KyvernoNamespace, name, err)
			}
		})
	}
}

// servedPolicyAPIs returns the kyverno.io and policies.kyverno.io group/versions the cluster
// serves, sorted, asked of its apiserver directly.
func servedPolicyAPIs(t *testing.T, cluster string) ([]string, error) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testFleet.Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := cs.Discovery().ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", cluster, err)
	}
	var apis []string
	for _, g := range groups.Groups {
		if g.Name == "kyverno.io" || g.Name == "policies.kyverno.io" {
			for _, v := range g.Versions {
				apis = append(apis, v.GroupVersion)
			}
		}
	}
	slices.Sort(apis)
	return apis, nil
}

// engineOf reads the cluster's summary's spec.engine on the hub.
func engineOf(t *testing.T, cluster string) (policyhubv1.EngineInfo, error) {
	t.Helper()
	s, err := hubSummaryOf(t, cluster)
	if err != nil {
		return policyhubv1.EngineInfo{}, err
	}
	return s.Spec.Engine, nil
}
