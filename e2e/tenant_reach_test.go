package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A tenant reaches only what the hub admin granted its namespace. Alice, bound in hub namespace
// team-a to the tenant role config/rbac/tenant ships (as Kubernetes' edit role aggregates it), is
// granted cluster-1 only. Whatever her ApplicationPolicy asks, it never lands in cluster-2 (it is
// Stalled, NotGranted, naming the place), she cannot grant herself more, nor name another
// namespace's OCM Placement or write a mutating rule: those are refused at admission.
func TestTenantReachesOnlyWhatIsGranted(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const tenant = "team-a"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, tenant)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(c).Config), tenant)
	}
	alice := tenantClient(t, tenant, "alice")

	// The hub admin's grant: cluster-1, namespace team-a.
	grant := &policyhubv1.TenantGrant{ObjectMeta: metav1.ObjectMeta{Name: "e2e-team-a"}, Spec: policyhubv1.TenantGrantSpec{
		Tenants: []string{tenant}, Clusters: policyhubv1.Placement{Clusters: []string{"cluster-1"}}}}
	if err := hub.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(ctx, grant) })

	// She cannot widen her own reach.
	mine := &policyhubv1.TenantGrant{ObjectMeta: metav1.ObjectMeta{Name: "alice-everything"}, Spec: policyhubv1.TenantGrantSpec{
		Tenants: []string{tenant}, Clusters: policyhubv1.Placement{Clusters: []string{"cluster-2"}}, Namespaces: []string{"kube-system"}}}
	if err := alice.Create(ctx, mine); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant creating a TenantGrant: %v, want Forbidden", err)
		_ = hub.Delete(ctx, mine)
	}

	// Refused at admission, with the field named: nothing is stored, so nothing can be dispatched.
	for _, tc := range []struct{ what, edit, want string }{
		{"a mutating rule", "    mutate: {patchStrategicMerge: {metadata: {labels: {team: a}}}}\n", "may not mutate"},
		{"another namespace's Placement", "", "placementRef.namespace is not allowed"},
	} {
		manifest := teamApplicationPolicy("refused", tenant, "Enforce", "cluster-1")
		if tc.edit != "" {
			manifest = strings.Replace(manifest, "  - name: need-team\n", "  - name: need-team\n"+tc.edit, 1)
		} else {
			manifest = strings.Replace(manifest, "placement: {clusters: [cluster-1]}", "placement: {placementRef: {name: theirs, namespace: team-b}}", 1)
		}
		ap := &policyhubv1.ApplicationPolicy{}
		if err := yaml.Unmarshal([]byte(manifest), ap); err != nil {
			t.Fatal(err)
		}
		if err := alice.Create(ctx, ap); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid mentioning %q", tc.what, err, tc.want)
			_ = hub.Delete(ctx, ap)
		}
	}

	// Asking for both clusters: cluster-1 gets the policy; cluster-2 never does.
	ap := &policyhubv1.ApplicationPolicy{}
	if err := yaml.Unmarshal([]byte(teamApplicationPolicy("both", tenant, "Enforce", "cluster-1", "cluster-2")), ap); err != nil {
		t.Fatal(err)
	}
	inScope(t, ap)
	if err := alice.Create(ctx, ap); err != nil {
		t.Fatalf("alice creates an ApplicationPolicy in her namespace: %v", err)
	}
	t.Cleanup(func() {
		deleteDeclaration(t, &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ap.Namespace, Name: ap.Name}})
	})
	got := waitApplicationPolicy(t, tenant, "both", 60*time.Second, "synced where granted, NotGranted elsewhere", func(ap *appView) error {
		if err := apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"})(ap); err != nil {
			return err
		}
		for _, c := range ap.Status.Conditions {
			if c.Type == policyhubv1.ConditionStalled && c.Status == metav1.ConditionTrue && c.Reason == "NotGranted" && strings.Contains(c.Message, "cluster-2/team-a") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", ap.Status.Conditions)
	})
	t.Logf("Stalled: %s", stalledMessage(got))
	// She reads her ApplicationPolicy's per-cluster state, and cannot change it: only the hub
	// writes ClusterStatusSlices.
	mySlices := &policyhubv1.ClusterStatusSliceList{}
	if err := alice.List(ctx, mySlices, client.InNamespace(tenant), client.MatchingLabels{policyhubv1.LabelDeclarationUID: string(got.UID)}); err != nil || len(mySlices.Items) != 1 {
		t.Fatalf("alice lists her ApplicationPolicy's slices: %v (%d)", err, len(mySlices.Items))
	}
	forged := mySlices.Items[0].DeepCopy()
	forged.Clusters = append(forged.Clusters, policyhubv1.ClusterStatus{Name: "cluster-2", Phase: policyhubv1.ClusterPhaseSynced})
	if err := alice.Update(ctx, forged); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant updating a ClusterStatusSlice: %v, want Forbidden", err)
	}
	forged.ResourceVersion, forged.Name = "", forged.Name+"-forged"
	if err := alice.Create(ctx, forged); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant creating a ClusterStatusSlice: %v, want Forbidden", err)
	}
	if after, err := applicationPolicyWithClusters(ctx, hub, tenant, "both"); err != nil || len(after.Clusters) != 1 || after.Clusters[0].Name != "cluster-1" {
		t.Errorf("after the tenant's tries, the slices hold %+v (%v); want cluster-1 alone", after, err)
	}
	if names := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "Policy", tenant); len(names) != 1 {
		t.Errorf("cluster-1/%s holds %v, want the one policy", tenant, names)
	}
	// Held for a while: no pass of the hub ever writes to cluster-2.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("kyverno.io/v1")
		list.SetKind("PolicyList")
		if err := directClient(t, fleetOf(t).Cluster("cluster-2").Config).List(ctx, list, client.MatchingLabels{policyhubv1.LabelSourceNamespace: tenant}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Fatalf("cluster-2 holds %s/%s of %s: a place the tenant was never granted", list.Items[0].GetNamespace(), list.Items[0].GetName(), tenant)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Taking the grant back prunes what it allowed.
	if err := hub.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 300*time.Millisecond, "the policy pruned from cluster-1 once the grant is gone", func() error {
		if names := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "Policy", tenant); len(names) != 0 {
			return fmt.Errorf("cluster-1 still holds %v", names)
		}
		return nil
	})
}

func stalledMessage(ap *appView) string {
	for _, c := range ap.Status.Conditions {
		if c.Type == policyhubv1.ConditionStalled {
			return c.Message
		}
	}
	return ""
}

// tenantClient is a client acting as user (impersonated by the fleet's admin) with the tenant
// role of config/rbac/tenant bound in namespace, as a hub admin binds a team.
func tenantClient(t *testing.T, namespace, user string) client.Client {
	t.Helper()
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + user, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: applyClusterRole(t, "../config/rbac/tenant/cluster_role.yaml")},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if err := hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitAllowed(t, user, authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Group: policyhubv1.GroupVersion.Group, Resource: "fleetpolicyexceptions"})
	return impersonating(t, user)
}

// waitAllowed waits until the hub's authorizer lets user do what attrs say: a binding just made
// reaches the apiserver's RBAC cache a moment later, and a request made before is Forbidden.
func waitAllowed(t *testing.T, user string, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	hub := directClient(t, fleetOf(t).Hub.Config)
	eventually(t, 30*time.Second, 100*time.Millisecond, user+" allowed to "+attrs.Verb+" "+attrs.Resource, func() error {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
		if err := hub.Create(testContext(t), review); err != nil {
			return err
		}
		if !review.Status.Allowed {
			return fmt.Errorf("not yet: %s", review.Status.Reason)
		}
		return nil
	})
}

// applyClusterRole applies the ClusterRole of a config/rbac manifest to the hub, as a hub admin
// installs it, and returns its name.
func applyClusterRole(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	role := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &role.Object); err != nil {
		t.Fatal(err)
	}
	apply(testContext(t), t, directClient(t, fleetOf(t).Hub.Config), role)
	return role.GetName()
}
