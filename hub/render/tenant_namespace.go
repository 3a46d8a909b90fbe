package render

import (
	"fmt"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// tenantMayTarget refuses a tenant's policy in the hub's sync Lease namespace of a managed
// cluster: a namespaced policy there that denied updates of the Lease would lock the hub out of
// the cluster. Grants never reach it (placement.Reach); this is the render's own check, so that no
// path around the grants ships such a policy.
func tenantMayTarget(namespace string) error {
	if namespace == policyhubv1.SyncLeaseNamespace {
		return fmt.Errorf("target namespace %s is the hub's own in every managed cluster (its sync Lease is there): no ApplicationPolicy is placed there", namespace)
	}
	return nil
}
