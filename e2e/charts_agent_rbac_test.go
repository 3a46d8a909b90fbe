package e2e

import (
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/policyhub/policyhub/e2e/fleet"
	"github.com/policyhub/policyhub/internal/charttest"
)

// The agent chart's RBAC, really installed in a managed cluster, lets the agent read what it
// reports of the cluster's engine (Kyverno's Deployments, every legacy kind's objects, whose
// metadata only it keeps) and write nothing there: not a policy, not Kyverno's Deployments, and
// it reads no Secret.
func TestChartAgentReadsTheEngineAndWritesNothing(t *testing.T) {
	ctx := testContext(t)
	const cluster = "cluster-1"
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	ns := chartNamespace(ctx, t, c, "charts-agentrbac")
	r := mustRender(t, agentChartDir, "policyhub-agent", ns, charttest.Values(t, fmt.Sprintf(
		`{clusterName: %s, hubKubeconfigSecret: {name: k}, fullnameOverride: %s}`, cluster, chartTestName("charts-agent"))))
	chartInstall(ctx, t, c, r, "ServiceAccount", "ClusterRole", "ClusterRoleBinding")
	sa := r.One(t, "ServiceAccount").GetName()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(verb, group, resource, namespace string) bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":" + sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	// The apiserver's authorizer sees the new binding a moment after it is created.
	eventually(t, 10*time.Second, 100*time.Millisecond, "the agent's ClusterRoleBinding in effect", func() error {
		if !allowed("list", "kyverno.io", "clusterpolicies", "") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	for _, verb := range []string{"list", "watch"} {
		if !allowed(verb, "apps", "deployments", fleet.KyvernoNamespace) {
			t.Errorf("the agent may not %s Kyverno's Deployments", verb)
		}
		for _, resource := range []string{"clusterpolicies", "policies", "clustercleanuppolicies", "cleanuppolicies", "policyexceptions"} {
			if !allowed(verb, "kyverno.io", resource, "") {
				t.Errorf("the agent may not %s kyverno.io %s in every namespace", verb, resource)
			}
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		for _, resource := range []string{"clusterpolicies", "policies", "policyexceptions"} {
			if allowed(verb, "kyverno.io", resource, "") {
				t.Errorf("the agent may %s kyverno.io %s", verb, resource)
			}
		}
		if allowed(verb, "apps", "deployments", fleet.KyvernoNamespace) {
			t.Errorf("the agent may %s Kyverno's Deployments", verb)
		}
	}
	for _, namespace := range []string{"", fleet.KyvernoNamespace} {
		if allowed("list", "", "secrets", namespace) || allowed("get", "", "secrets", namespace) {
			t.Errorf("the agent may read Secrets (namespace %q)", namespace)
		}
	}
	// The background evaluation of ValidatingAdmissionPolicies reads them and their bindings,
	// writes neither, and reads the API server's /metrics (admissionPolicies.readAPIServerMetrics).
	for _, resource := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"} {
		for _, verb := range []string{"list", "watch"} {
			if !allowed(verb, "admissionregistration.k8s.io", resource, "") {
				t.Errorf("the agent may not %s %s", verb, resource)
			}
		}
		if allowed("create", "admissionregistration.k8s.io", resource, "") || allowed("delete", "admissionregistration.k8s.io", resource, "") {
			t.Errorf("the agent may write %s", resource)
		}
	}
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:" + ns + ":" + sa,
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed {
		t.Errorf("the agent may not GET the API server's /metrics (%v)", err)
	}
}
