package e2e

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A hub admin cannot grant a tenant the hub's sync Lease namespace of the managed clusters: the
// hub apiserver refuses a TenantGrant naming it, or one granting a tenant named like it its own
// namespace's name, saying why; nothing is stored. (The hub refuses such a place too, whatever a
// grant says: hub/placement TestNoGrantReachesTheSyncLeaseNamespace, hub/render
// TestApplicationPolicyNeverTargetsTheSyncLeaseNamespace.)
func TestTenantGrantNeverNamesTheSyncLeaseNamespace(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const hubNS = policyhubv1.SyncLeaseNamespace
	clusters := policyhubv1.Placement{Clusters: []string{"cluster-1"}}
	for _, tc := range []struct {
		what       string
		tenants    []string
		namespaces []string
		want       string // "": admitted
	}{
		{"a grant naming it", []string{"team-a"}, []string{"team-a", hubNS}, "spec.namespaces may not name " + hubNS},
		{"a tenant named like it, granted its own name", []string{hubNS}, nil, "spec.tenants names " + hubNS + " without spec.namespaces"},
		{"a tenant named like it, granted other namespaces", []string{hubNS}, []string{"team-a"}, ""},
	} {
		grant := &policyhubv1.TenantGrant{ObjectMeta: metav1.ObjectMeta{Name: "e2e-grant-hub-namespace"},
			Spec: policyhubv1.TenantGrantSpec{Tenants: tc.tenants, Clusters: clusters, Namespaces: tc.namespaces}}
		err := hub.Create(ctx, grant)
		if err == nil {
			if err := hub.Delete(context.Background(), grant); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete TenantGrant %s: %v", grant.Name, err)
			}
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it admitted", tc.what, err)
		case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want Invalid saying %q", tc.what, err, tc.want)
		}
	}
}
