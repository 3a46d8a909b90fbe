package placement

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// everywhere grants tenant every cluster of inv in the given namespaces.
func everywhere(inv Inventory, tenant string, namespaces ...string) Reach {
	var names []string
	for _, c := range inv.Clusters {
		names = append(names, c.Name)
	}
	r, err := ReachOf(Grants{Tenant: tenant, TenantGrants: []policyhubv1.TenantGrant{{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Spec:       policyhubv1.TenantGrantSpec{Tenants: []string{tenant}, Clusters: policyhubv1.Placement{Clusters: names}, Namespaces: namespaces},
	}}}, inv)
	if err != nil {
		panic(err)
	}
	return r
}

// A tenant reaches only what its grants give it, whatever its own spec asks: other clusters,
// other namespaces (from a KubeVela topology) and other namespaces' OCM Placements stay out.
func TestApplicationPolicyReachesOnlyWhatIsGranted(t *testing.T) {
	inv := Inventory{
		Clusters: []Cluster{
			{Name: "dev-1", Labels: map[string]string{"env": "dev"}},
			{Name: "prod-1", Labels: map[string]string{"env": "prod", clusterv1beta2.ClusterSetLabel: "prod-set"}},
			{Name: "prod-2", Labels: map[string]string{"env": "prod"}},
		},
		Decisions: map[types.NamespacedName][]string{{Namespace: "team-b", Name: "theirs"}: {"prod-2"}},
	}
	grant := func(tenants []string, clusters policyhubv1.Placement, namespaces ...string) policyhubv1.TenantGrant {
		return policyhubv1.TenantGrant{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: policyhubv1.TenantGrantSpec{Tenants: tenants, Clusters: clusters, Namespaces: namespaces}}
	}
	devOnly := grant([]string{"team-a"}, policyhubv1.Placement{ClusterSelector: &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"env": "dev"}}})
	for _, tt := range []struct {
		name       string
		grants     Grants
		placement  *policyhubv1.Placement
		topologies []Topology
		want       string // targets
		refused    string // not granted
		err        string
	}{
		{name: "no grant reaches nothing", grants: Grants{Tenant: "team-a"},
			placement: &policyhubv1.Placement{Clusters: []string{"dev-1", "prod-1"}},
			want:      "[]", refused: "[{dev-1 team-a false} {prod-1 team-a false}]"},
		{name: "a grant's clusters only", grants: Grants{Tenant: "team-a", TenantGrants: []policyhubv1.TenantGrant{devOnly}},
			placement: &policyhubv1.Placement{ClusterSelector: &policyhubv1.ClusterSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}}},
			want:      "[{dev-1 team-a false}]", refused: "[{prod-1 team-a false} {prod-2 team-a false}]"},
		{name: "a topology's other namespace needs granting", grants: Grants{Tenant: "team-a", TenantGrants: []policyhubv1.TenantGrant{devOnly}},
			topologies: []Topology{{Placement: policyhubv1.Placement{Clusters: []string{"dev-1"}}, Namespace: "ingress-nginx"}},
			want:       "[]", refused: "[{dev-1 ingress-nginx false}]"},
		{name: "a granted other namespace", grants: Grants{Tenant: "team-a", TenantGrants: []policyhubv1.TenantGrant{
			grant([]string{"team-a"}, policyhubv1.Placement{Clusters: []string{"dev-1"}}, "team-a-web")}},
			topologies: []Topology{{Placement: policyhubv1.Placement{Clusters: []string{"dev-1"}}, Namespace: "team-a-web"}},
			want:       "[{dev-1 team-a-web false}]", refused: "[]"},
		{name: "a grant for another tenant gives nothing", grants: Grants{Tenant: "team-a", TenantGrants: nil},
			placement: &policyhubv1.Placement{Clusters: []string{"dev-1"}},
			want:      "[]", refused: "[{dev-1 team-a false}]"},
		{name: "an OCM cluster set bound to the namespace", grants: Grants{Tenant: "team-a", ClusterSets: []string{"prod-set"}},
			placement: &policyhubv1.Placement{Clusters: []string{"prod-1", "prod-2"}},
			want:      "[{prod-1 team-a false}]", refused: "[{prod-2 team-a false}]"},
		{name: "another namespace's OCM Placement is refused", grants: Grants{Tenant: "team-a", ClusterSets: []string{"prod-set"}},
			placement: &policyhubv1.Placement{PlacementRef: &policyhubv1.PlacementRef{Name: "theirs", Namespace: "team-b"}},
			err:       "may use only Placements of its own namespace team-a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reach, err := ReachOf(tt.grants, inv)
			if err != nil {
				t.Fatal(err)
			}
			ap := &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a"}}
			ap.Spec.Placement = tt.placement
			sel, err := ApplicationPolicy(ap, tt.topologies, inv, reach)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, refused := fmt.Sprint(sel.Targets), fmt.Sprint(sel.NotGranted); got != tt.want || refused != tt.refused {
				t.Errorf("targets %s not granted %s, want %s and %s", got, refused, tt.want, tt.refused)
			}
		})
	}
}

// The hub's sync Lease namespace is never a tenant's: a grant naming it, a tenant namespace named
// like it (its own namespace's name), or a KubeVela topology deploying there reaches nothing there,
// so no tenant's policy can deny the hub's Lease updates; the other granted places still count.
func TestNoGrantReachesTheSyncLeaseNamespace(t *testing.T) {
	inv := Inventory{Clusters: []Cluster{{Name: "dev-1"}}}
	const hubNS = policyhubv1.SyncLeaseNamespace
	for _, tt := range []struct {
		name       string
		tenant     string
		namespaces []string
		placement  *policyhubv1.Placement
		topologies []Topology
		want       string
		refused    string
	}{
		{name: "a grant naming it", tenant: "team-a", namespaces: []string{hubNS, "team-a"},
			topologies: []Topology{{Placement: policyhubv1.Placement{Clusters: []string{"dev-1"}}, Namespace: hubNS},
				{Placement: policyhubv1.Placement{Clusters: []string{"dev-1"}}}},
			want: "[{dev-1 team-a false}]", refused: "[{dev-1 " + hubNS + " false}]"},
		{name: "a tenant named like it, granted its own namespace", tenant: hubNS,
			placement: &policyhubv1.Placement{Clusters: []string{"dev-1"}},
			want:      "[]", refused: "[{dev-1 " + hubNS + " false}]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reach := everywhere(inv, tt.tenant, tt.namespaces...)
			if reach.Allows("dev-1", hubNS) {
				t.Errorf("Allows(dev-1, %s)", hubNS)
			}
			ap := &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: tt.tenant}}
			ap.Spec.Placement = tt.placement
			sel, err := ApplicationPolicy(ap, tt.topologies, inv, reach)
			if err != nil {
				t.Fatal(err)
			}
			if got, refused := fmt.Sprint(sel.Targets), fmt.Sprint(sel.NotGranted); got != tt.want || refused != tt.refused {
				t.Errorf("targets %s not granted %s, want %s and %s", got, refused, tt.want, tt.refused)
			}
		})
	}
}
