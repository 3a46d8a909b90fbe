package e2e

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/internal/charttest"
)

// The hub chart's RBAC, really installed on the hub, grants policyhub-hub what it needs and not
// more: Secrets only in the gateway's namespace, Leases only in its own, no writes of what the
// hub only reads.
func TestChartHubRBACIsLeastPrivilege(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	ns := chartNamespace(ctx, t, hub, "charts-hubrbac")
	gatewayNS := chartNamespace(ctx, t, hub, "charts-hubrbac-gw")
	name := chartTestName("charts-hub")
	r := mustRender(t, hubChartDir, "policyhub-hub", ns, charttest.Values(t, fmt.Sprintf(
		`{fullnameOverride: %s, gateway: {secretNamespace: %s}, metrics: {readerSubjects: [{kind: ServiceAccount, name: prometheus}]}}`, name, gatewayNS)))
	chartInstall(ctx, t, hub, r, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	sa := r.One(t, "ServiceAccount").GetName()

	type access struct {
		verb, group, resource, subresource, namespace string
	}
	allowed := []access{
		{"list", "policyhub.io", "fleetpolicies", "", ""},
		{"watch", "policyhub.io", "applicationpolicies", "", ""},
		{"patch", "policyhub.io", "fleetpolicies", "status", ""},
		{"update", "policyhub.io", "applicationpolicies", "status", "shop"},
		{"list", "policyhub.io", "policyreportsummaries", "", ""},
		{"patch", "policyhub.io", "policyreportsummaries", "status", "cluster-1"},
		{"create", "cluster.core.oam.dev", "clustergateways", "proxy", ""},
		{"list", "cluster.open-cluster-management.io", "placementdecisions", "", ""},
		{"watch", "cluster.open-cluster-management.io", "placements", "", ""},
		// The approval fence of exceptions, read to tell whether it is in place.
		{"list", "admissionregistration.k8s.io", "validatingadmissionpolicies", "", ""},
		{"watch", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", ""},
		{"patch", "core.oam.dev", "applications", "status", "shop"},
		{"create", "events.k8s.io", "events", "", "shop"},
		{"list", "", "secrets", "", gatewayNS},
		{"watch", "", "secrets", "", gatewayNS},
		{"create", "coordination.k8s.io", "leases", "", ns},
		{"update", "coordination.k8s.io", "leases", "", ns},
		{"patch", "", "configmaps", "", ns},
		// PolicySets: the policy libraries and the snapshots of their versions are ConfigMaps of
		// the hub's namespace, and an OCI source's registry credentials a Secret there (read by
		// name, never listed).
		{"list", "", "configmaps", "", ns},
		{"delete", "", "configmaps", "", ns},
		{"get", "", "secrets", "", ns},
		{"list", "source.toolkit.fluxcd.io", "gitrepositories", "", "flux-system"},
		// --metrics-secure: each scrape's token and access are checked by the apiserver.
		{"create", "authentication.k8s.io", "tokenreviews", "", ""},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", ""},
	}
	denied := []access{
		{"list", "", "secrets", "", ""},
		{"list", "", "secrets", "", ns},
		{"get", "", "secrets", "", "default"},
		{"list", "", "secrets", "", "default"},
		{"create", "", "secrets", "", gatewayNS},
		{"create", "coordination.k8s.io", "leases", "", gatewayNS},
		{"create", "policyhub.io", "fleetpolicies", "", ""},
		{"delete", "policyhub.io", "fleetpolicies", "", ""},
		// KubeVela, not the hub, writes the ApplicationPolicies of kyverno-policy entries.
		{"create", "policyhub.io", "applicationpolicies", "", "shop"},
		{"delete", "policyhub.io", "applicationpolicies", "", "shop"},
		{"create", "policyhub.io", "policyreportsummaries", "", "cluster-1"},
		{"delete", "cluster.core.oam.dev", "clustergateways", "", ""},
		// The hub neither approves exceptions nor installs (or removes) the fence it checks.
		{"approve", "policyhub.io", "fleetpolicyexceptions", "", "shop"},
		{"create", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "", ""},
		{"delete", "admissionregistration.k8s.io", "validatingadmissionpolicies", "", ""},
		{"update", "core.oam.dev", "applications", "", "shop"},
		{"create", "", "pods", "", ns},
		{"list", "", "configmaps", "", "default"},
		{"patch", "", "configmaps", "", "default"},
		{"create", "source.toolkit.fluxcd.io", "gitrepositories", "", "flux-system"},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", ns},
	}
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	check := func(a access) bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + ns + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, a := range allowed {
		if !check(a) {
			t.Errorf("policyhub-hub may not %+v", a)
		}
	}
	for _, a := range denied {
		if check(a) {
			t.Errorf("policyhub-hub may %+v", a)
		}
	}

	// The metrics reader (metrics.readerSubjects, in the release's namespace by default) may get
	// /metrics and nothing else; the hub itself may not.
	scrape := func(user, verb, path string) bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: verb, Path: path},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	prometheus := "system:serviceaccount:" + ns + ":prometheus"
	if !scrape(prometheus, "get", "/metrics") {
		t.Errorf("the metrics reader may not get /metrics")
	}
	for _, c := range []struct{ user, verb, path string }{
		{prometheus, "get", "/debug/pprof/"}, {prometheus, "post", "/metrics"}, {"system:serviceaccount:" + ns + ":" + sa, "get", "/metrics"},
	} {
		if scrape(c.user, c.verb, c.path) {
			t.Errorf("%s may %s %s", c.user, c.verb, c.path)
		}
	}
}

// The agent chart's hub access, really installed on the hub for a cluster (its namespace created
// by the chart), gives that cluster's agent a ServiceAccount whose token may write its own
// cluster's PolicyReportSummary and nothing else: not another cluster's (set up by the same chart),
// not Secrets, not FleetPolicies.
func TestChartAgentHubAccessIsolation(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	cluster, other := chartTestName("charts-cluster-a"), chartTestName("charts-cluster-b")
	for _, c := range []string{cluster, other} {
		r := mustRender(t, agentChartDir, "policyhub-agent", c, charttest.Values(t, fmt.Sprintf(
			`{clusterName: %s, agent: {enabled: false}, hubAccess: {enabled: true, createNamespace: true}}`, c)))
		if got, want := r.Kinds(), map[string]int{"Namespace": 1, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1}; !reflect.DeepEqual(got, want) {
			t.Fatalf("hub access renders %v, want %v", got, want)
		}
		chartInstall(ctx, t, hub, r, "Namespace", "ServiceAccount", "Role", "RoleBinding")
		t.Cleanup(func() { // before the namespace goes (cleanups run last-in first-out)
			_ = hub.Delete(context.Background(), &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: policyhubv1.SummaryName}})
		})
	}

	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(cluster).CreateToken(ctx, "policyhub-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s's agent: %v", cluster, err)
	}
	cfg := rest.AnonymousClientConfig(fleetOf(t).Hub.Config)
	cfg.BearerToken = tr.Status.Token
	agent, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}

	own := summaryFor(cluster, cluster)
	if err := applySummary(ctx, agent, own, "policyhub-agent"); err != nil {
		t.Fatalf("the agent cannot apply its own cluster's summary: %v", err)
	}
	if err := agent.Get(ctx, client.ObjectKeyFromObject(own), &policyhubv1.PolicyReportSummary{}); err != nil {
		t.Errorf("the agent cannot read back its own summary: %v", err)
	}
	forbidden := map[string]error{
		"apply another cluster's summary": applySummary(ctx, agent, summaryFor(other, cluster), "policyhub-agent"),
		"read another cluster's summary":  agent.Get(ctx, client.ObjectKey{Namespace: other, Name: policyhubv1.SummaryName}, &policyhubv1.PolicyReportSummary{}),
		"delete its own summary":          agent.Delete(ctx, own.DeepCopy()),
		"list Secrets in its namespace":   agent.List(ctx, &corev1.SecretList{}, client.InNamespace(cluster)),
		"get a Secret in its namespace":   agent.Get(ctx, client.ObjectKey{Namespace: cluster, Name: "any"}, &corev1.Secret{}),
		"list FleetPolicies":              agent.List(ctx, &policyhubv1.FleetPolicyList{}),
		"create a ConfigMap in its namespace": agent.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "x"}},
			client.DryRunAll),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the agent may %s: got %v, want Forbidden", what, err)
		}
	}
	// The other cluster's summary was not created by the refused apply.
	if err := hub.Get(ctx, client.ObjectKey{Namespace: other, Name: policyhubv1.SummaryName}, &policyhubv1.PolicyReportSummary{}); !apierrors.IsNotFound(err) {
		t.Errorf("the other cluster's summary: got %v, want NotFound", err)
	}
}
