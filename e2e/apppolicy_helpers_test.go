package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// createApplicationPolicy creates an ApplicationPolicy from YAML and, when the test ends, deletes
// it and waits until the hub has pruned it and let it go.
func createApplicationPolicy(t *testing.T, manifest string) *policyhubv1.ApplicationPolicy {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	ap := &policyhubv1.ApplicationPolicy{}
	if err := yaml.Unmarshal([]byte(manifest), ap); err != nil {
		t.Fatal(err)
	}
	inScope(t, ap)
	if err := hub.Create(ctx, ap); err != nil {
		t.Fatalf("create ApplicationPolicy %s: %v", ap.Name, err)
	}
	t.Cleanup(func() {
		deleteDeclaration(t, &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ap.Namespace, Name: ap.Name}})
	})
	return ap
}

// waitApplicationPolicy polls the ApplicationPolicy until check accepts it (within timeout).
func waitApplicationPolicy(t *testing.T, namespace, name string, timeout time.Duration, what string, check func(*appView) error) *appView {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	var ap *appView
	eventually(t, timeout, 300*time.Millisecond, what, func() error {
		var err error
		if ap, err = applicationPolicyWithClusters(testContext(t), hub, namespace, name); err != nil {
			return err
		}
		if ap.Status.ObservedGeneration != ap.Generation {
			return fmt.Errorf("status is of generation %d, spec is %d", ap.Status.ObservedGeneration, ap.Generation)
		}
		return check(ap)
	})
	return ap
}

// apPhases is a check that the ApplicationPolicy's clusters have exactly these phases.
func apPhases(want map[string]policyhubv1.ClusterPhase) func(*appView) error {
	return func(ap *appView) error {
		got := map[string]policyhubv1.ClusterPhase{}
		for _, c := range ap.Clusters {
			got[c.Name] = c.Phase
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("cluster phases %v, want %v (conditions %+v)", got, want, ap.Status.Conditions)
		}
		return nil
	}
}

// ownedPolicies lists the Kyverno objects of kind (kyverno.io/v1 Policy or policies.kyverno.io/v1
// NamespacedValidatingPolicy) the e2e hub owns in namespace of cluster.
func ownedPolicies(t *testing.T, cluster, apiVersion, kind, namespace string) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(apiVersion)
	list.SetKind(kind + "List")
	if err := directClient(t, fleetOf(t).Cluster(cluster).Config).List(testContext(t), list, client.InNamespace(namespace), client.MatchingLabels{policyhubv1.LabelManagedBy: e2eHubID}); err != nil {
		t.Fatalf("list %s in %s: %v", kind, cluster, err)
	}
	var names []string
	for _, item := range list.Items {
		names = append(names, item.GetName())
	}
	return names
}

// grantTenant grants the hub namespace tenant (its ApplicationPolicies and KubeVela entries) both
// managed clusters, in its own namespace and the given ones, as a hub admin would with a
// TenantGrant; the grant goes when the test ends. Without it a tenant reaches nothing.
func grantTenant(ctx context.Context, t *testing.T, tenant string, namespaces ...string) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	grant := &policyhubv1.TenantGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + tenant},
		Spec: policyhubv1.TenantGrantSpec{
			Tenants:    []string{tenant},
			Clusters:   policyhubv1.Placement{Clusters: []string{"cluster-1", "cluster-2"}},
			Namespaces: append([]string{tenant}, namespaces...),
		},
	}
	if err := hub.Create(ctx, grant); err != nil {
		t.Fatalf("grant tenant %s: %v", tenant, err)
	}
	t.Cleanup(func() {
		if err := hub.Delete(context.Background(), grant); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete TenantGrant %s: %v", grant.Name, err)
		}
	})
}
