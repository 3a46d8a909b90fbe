package render

import (
	"strings"
	"testing"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

// An ApplicationPolicy placed in the hub's sync Lease namespace (by any path around the grants) is
// refused at render: Invalid, naming the namespace, and nothing rendered for any cluster, so
// no tenant's namespaced policy there can deny the hub's Lease updates.
func TestApplicationPolicyNeverTargetsTheSyncLeaseNamespace(t *testing.T) {
	ap := newApplicationPolicy(t, "shop", "limits", "application: shop\nscope: {kinds: [Deployment]}\n"+limitRules)
	if _, err := ApplicationPolicyTargets("hub-a", ap, []placement.AppTarget{{Cluster: "c1", Namespace: "shop"}}); err != nil {
		t.Fatalf("the tenant's own namespace: %v", err)
	}
	targets, err := ApplicationPolicyTargets("hub-a", ap, []placement.AppTarget{
		{Cluster: "c1", Namespace: "shop"}, {Cluster: "c2", Namespace: policyhubv1.SyncLeaseNamespace}})
	invalid, ok := AsInvalid(err)
	if !ok || !strings.Contains(err.Error(), "target namespace "+policyhubv1.SyncLeaseNamespace+" is the hub's own") || targets != nil {
		t.Fatalf("placed in %s: targets %v, error %v (invalid %v); want Invalid naming the namespace, nothing rendered",
			policyhubv1.SyncLeaseNamespace, targets, err, invalid)
	}
	if _, err := ApplicationPolicy("hub-a", ap, policyhubv1.SyncLeaseNamespace); err == nil {
		t.Errorf("ApplicationPolicy rendered for namespace %s", policyhubv1.SyncLeaseNamespace)
	}
}
