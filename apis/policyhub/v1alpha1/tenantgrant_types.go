package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantGrantSpec grants hub namespaces (tenants) reach into the fleet: the clusters their
// ApplicationPolicies (and KubeVela Applications' kyverno-policy entries) may be placed on, and
// the namespaces in those clusters their policies may govern.
// +kubebuilder:validation:XValidation:rule="!has(self.clusters.placementRef) || (has(self.clusters.placementRef.namespace) && size(self.clusters.placementRef.namespace) > 0)",message="spec.clusters.placementRef.namespace is required: a TenantGrant is cluster-scoped"
// The hub's sync Lease namespace (SyncLeaseNamespace) is never granted: the hub refuses it too.
// +kubebuilder:validation:XValidation:rule="!has(self.namespaces) || !('policyhub-system' in self.namespaces)",message="spec.namespaces may not name policyhub-system: it holds the hub's sync Lease in every managed cluster, and no tenant's policy goes there"
// +kubebuilder:validation:XValidation:rule="(has(self.namespaces) && size(self.namespaces) > 0) || !('policyhub-system' in self.tenants)",message="spec.tenants names policyhub-system without spec.namespaces, which would grant the namespace named like it: policyhub-system holds the hub's sync Lease in every managed cluster, and no tenant's policy goes there"
type TenantGrantSpec struct {
	// Tenants are the hub namespaces this grant is for: an ApplicationPolicy in one of them may
	// reach what the grant allows, and nothing else.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Tenants []string `json:"tenants"`

	// Clusters the tenants may place policies on: names, labels, or an OCM Placement (with its
	// namespace). Empty selects no cluster.
	Clusters Placement `json:"clusters"`

	// Namespaces in those clusters the tenants' policies may govern. Empty: only the namespace
	// named like the tenant's own hub namespace (an ApplicationPolicy in hub namespace shop
	// reaches namespace shop in the granted clusters). A KubeVela Application whose topology
	// deploys to another namespace needs that namespace listed here.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
}

// TenantGrant is a hub admin's grant of reach to tenants: which clusters, and which namespaces in
// them, the ApplicationPolicies of some hub namespaces may place policies on. Without a grant an
// ApplicationPolicy reaches no cluster. Only hub admins should be allowed to write it (it is
// cluster-scoped for that reason).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tg,categories=policyhub
// +kubebuilder:printcolumn:name="Tenants",type=string,JSONPath=`.spec.tenants`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TenantGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which tenants reach which clusters and namespaces.
	Spec TenantGrantSpec `json:"spec"`
}

// TenantGrantList is a list of TenantGrant.
// +kubebuilder:object:root=true
type TenantGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantGrant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TenantGrant{}, &TenantGrantList{})
}
