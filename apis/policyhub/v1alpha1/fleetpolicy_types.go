package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyTemplate is one complete policy object: any Kyverno kind the fleet runs (kyverno.io/v1
// ClusterPolicy or Policy, policies.kyverno.io/v1 ValidatingPolicy and its siblings), a
// Kubernetes admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (policyhub writes its
// binding, with the mode's validation actions) or MutatingAdmissionPolicy (its binding too; it
// needs spec.allow Mutate), or a Gatekeeper templates.gatekeeper.sh/v1
// ConstraintTemplate or constraints.gatekeeper.sh/v1beta1 Constraint (the mode sets its
// spec.enforcementAction).
// Its spec is kept as given; policyhub adds its ownership labels and, where asked, rewrites the mode.
// +kubebuilder:validation:XValidation:rule="has(self.apiVersion) && size(self.apiVersion) > 0",message="template.apiVersion is required: the Kyverno policy's apiVersion, e.g. kyverno.io/v1 or policies.kyverno.io/v1"
// +kubebuilder:validation:XValidation:rule="has(self.kind) && size(self.kind) > 0",message="template.kind is required: the Kyverno policy's kind, e.g. ClusterPolicy or ValidatingPolicy"
// +kubebuilder:validation:XValidation:rule="has(self.spec)",message="template.spec is required: the Kyverno policy's spec"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || self.apiVersion.startsWith('kyverno.io/') || self.apiVersion.startsWith('policies.kyverno.io/') || self.apiVersion.startsWith('admissionregistration.k8s.io/') || self.apiVersion == 'templates.gatekeeper.sh/v1' || self.apiVersion == 'constraints.gatekeeper.sh/v1beta1'",message="template must be a Kyverno policy, a Kubernetes ValidatingAdmissionPolicy or a Gatekeeper ConstraintTemplate or Constraint: the group of its apiVersion must be kyverno.io, policies.kyverno.io or admissionregistration.k8s.io, or it is templates.gatekeeper.sh/v1 or constraints.gatekeeper.sh/v1beta1 (Gatekeeper 3.23 serves constraints at v1beta1; mutations.gatekeeper.sh is never shipped)"
// +kubebuilder:validation:XValidation:rule="!has(self.kind) || !(self.kind == 'Policy' || self.kind == 'PolicyException' || self.kind.startsWith('Namespaced')) || (has(self.apiVersion) && (self.apiVersion.startsWith('templates.gatekeeper.sh/') || self.apiVersion.startsWith('constraints.gatekeeper.sh/'))) || (has(self.metadata) && has(self.metadata.namespace) && size(self.metadata.namespace) > 0)",message="template.metadata.namespace is required for a namespaced Kyverno kind (Policy, PolicyException, Namespaced*)"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.name) || size(self.metadata.name) <= 63",message="template.metadata.name is longer than 63 characters: Kyverno refuses policy names longer than that"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.name) || size(self.metadata.name) > 63 || self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="template.metadata.name must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (a DNS-1123 subdomain): the clusters refuse any other policy name"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.name) || !self.metadata.name.startsWith('policyhub-shadow-')",message="template.metadata.name may not start with policyhub-shadow-: policyhub names its report-only shadows so, and their results never count as compliance"
// +kubebuilder:validation:XValidation:rule="!has(self.kind) || self.kind != 'PolicyException'",message="template.kind: a template may not be a PolicyException: exceptions are FleetPolicyExceptions (requested, approved by someone else, expiring)"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || !has(self.kind) || self.kind == 'PolicyException' || (self.apiVersion.startsWith('kyverno.io/') && self.kind in ['ClusterPolicy', 'Policy', 'ClusterCleanupPolicy', 'CleanupPolicy']) || (self.apiVersion.startsWith('policies.kyverno.io/') && self.kind in ['ValidatingPolicy', 'NamespacedValidatingPolicy', 'MutatingPolicy', 'NamespacedMutatingPolicy', 'GeneratingPolicy', 'NamespacedGeneratingPolicy', 'ImageValidatingPolicy', 'NamespacedImageValidatingPolicy', 'DeletingPolicy', 'NamespacedDeletingPolicy']) || (self.apiVersion.startsWith('admissionregistration.k8s.io/') && self.kind in ['ValidatingAdmissionPolicy', 'MutatingAdmissionPolicy']) || (self.apiVersion.startsWith('templates.gatekeeper.sh/') && self.kind == 'ConstraintTemplate') || self.apiVersion.startsWith('constraints.gatekeeper.sh/') || !(self.apiVersion.startsWith('kyverno.io/') || self.apiVersion.startsWith('policies.kyverno.io/') || self.apiVersion.startsWith('admissionregistration.k8s.io/') || self.apiVersion.startsWith('templates.gatekeeper.sh/'))",message="template.kind: not a policy kind policyhub ships (kyverno.io: ClusterPolicy, Policy, ClusterCleanupPolicy, CleanupPolicy; policies.kyverno.io: ValidatingPolicy, MutatingPolicy, GeneratingPolicy, ImageValidatingPolicy, DeletingPolicy and their Namespaced forms; admissionregistration.k8s.io: ValidatingAdmissionPolicy, MutatingAdmissionPolicy, whose bindings policyhub writes; templates.gatekeeper.sh: ConstraintTemplate; constraints.gatekeeper.sh: any Constraint kind)"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.namespace) || self.metadata.namespace != 'policyhub-system'",message="template.metadata.namespace may not be policyhub-system: it is the hub's own namespace in every cluster (its sync Lease, and Kyverno's exception namespace)"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || !(self.apiVersion.startsWith('templates.gatekeeper.sh/') || self.apiVersion.startsWith('constraints.gatekeeper.sh/')) || !has(self.metadata) || !has(self.metadata.namespace) || size(self.metadata.namespace) == 0",message="template.metadata.namespace: Gatekeeper's ConstraintTemplates and Constraints are cluster-scoped: leave it out"
type PolicyTemplate struct {
	// APIVersion of the Kyverno policy, e.g. kyverno.io/v1 or policies.kyverno.io/v1.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the Kyverno policy, e.g. ClusterPolicy, Policy, ValidatingPolicy, PolicyException.
	// +optional
	Kind string `json:"kind,omitempty"`

	// Metadata of the policy object written to the clusters.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`

	// Spec of the Kyverno policy, kept as given.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec *runtime.RawExtension `json:"spec,omitempty"`
}

// TemplateMetadata is the part of a policy's metadata a template may set.
type TemplateMetadata struct {
	// Name of the policy object in the clusters; defaults to the declaration's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Namespace of the policy object, for namespaced kinds (Policy, PolicyException, Namespaced*).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// Labels copied to the policy object; policyhub adds its own ownership labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations copied to the policy object, e.g. policies.kyverno.io/title, category, severity.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ClusterOverride changes how the declaration applies to some of the selected clusters, e.g.
// dry-run in prod while enforcing in staging. Where several overrides select a cluster, later
// entries win field by field.
// +kubebuilder:validation:XValidation:rule="(has(self.clusters) && size(self.clusters) > 0) || has(self.clusterSelector)",message="a cluster override must select clusters: give clusters or clusterSelector"
type ClusterOverride struct {
	// Clusters the override applies to, by name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	Clusters []string `json:"clusters,omitempty"`

	// ClusterSelector selects the clusters the override applies to by their labels. It must
	// require a label (a matchLabels entry, or a matchExpressions entry with operator In or
	// Exists): NotIn and DoesNotExist alone select every cluster without the label.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="clusterOverrides[].clusterSelector is empty and would select every cluster; give matchLabels or matchExpressions, or list clusters by name"
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || !has(self.matchExpressions) || size(self.matchExpressions) == 0 || self.matchExpressions.exists(e, e.operator == 'In' || e.operator == 'Exists')",message="clusterOverrides[].clusterSelector has only NotIn or DoesNotExist requirements and would select every cluster without those labels: add a matchLabels entry or a matchExpressions entry with operator In or Exists, or list clusters by name"
	ClusterSelector *ClusterSelector `json:"clusterSelector,omitempty"`

	// Mode overrides the mode in these clusters.
	// +optional
	Mode *Mode `json:"mode,omitempty"`

	// DryRun plans and dry-run applies in these clusters without persisting anything.
	// +optional
	DryRun *bool `json:"dryRun,omitempty"`

	// Exclude removes these clusters from the placement (owned objects there are pruned).
	// +optional
	Exclude bool `json:"exclude,omitempty"`
}

// FleetPolicySpec declares one Kyverno policy and the clusters it must run in.
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.mode)",message="spec.mode cannot be set with spec.rollout: the rollout runs each wave in Audit, then Enforce"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.clusterOverrides) || self.clusterOverrides.all(o, !has(o.mode))",message="spec.clusterOverrides[].mode cannot be set with spec.rollout: the rollout decides each cluster's mode"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || !has(self.placement.placementRef) || (has(self.placement.placementRef.namespace) && size(self.placement.placementRef.namespace) > 0)",message="placement.placementRef.namespace is required on a FleetPolicy, which is cluster-scoped"
// +kubebuilder:validation:XValidation:rule="!has(self.preview) || has(self.preview.template) || has(oldSelf.preview)",message="spec.preview without a template holds spec.template back (nothing but its shadow ships) and may only be set when the FleetPolicy is created: to preview a change to a policy already in force, put the candidate in spec.preview.template (the live one keeps running)"
// +kubebuilder:validation:XValidation:rule="!has(self.preview) || !has(self.rollout) || !has(self.rollout.previewGate)",message="spec.preview cannot be set with spec.rollout.previewGate: the rollout previews each new version itself"
type FleetPolicySpec struct {
	// Template is the Kyverno policy to run in every selected cluster.
	Template PolicyTemplate `json:"template"`

	// Delivery is where and how the policy goes to the fleet.
	Delivery `json:",inline"`

	// Allow lets the template do more than validate: Mutate, Generate, Cleanup, VerifyImages.
	// Empty ships a validating policy only; a template that mutates, generates, deletes or
	// verifies images without being allowed here is Stalled, never dispatched. Exceptions are
	// never a template: they are FleetPolicyExceptions (requested, approved, expiring).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Allow []PolicyCapability `json:"allow,omitempty"`

	// Preview ships a report-only shadow of a candidate to every placed cluster and shows, in
	// status.preview, what it would fail there (in total, per cluster, newly against the live
	// version, the first ones named). The shadow never denies a request and never counts toward
	// compliance; it is removed when spec.preview is.
	// +optional
	Preview *PreviewSpec `json:"preview,omitempty"`
}

// FleetPolicyStatus is the observed state of a FleetPolicy across its clusters.
type FleetPolicyStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled (kstatus-compatible).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Summary totals the clusters' state and names those that need attention; the state in each
	// cluster is in the declaration's ClusterStatusSlices (kubectl policyhub status NAME).
	// +optional
	Summary StatusSummary `json:"summary,omitempty"`

	// Rollout is the progressive rollout's state, when spec.rollout is set.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// Preview is what the preview asked for in spec.preview has learned so far.
	// +optional
	Preview *PreviewStatus `json:"preview,omitempty"`
}

// FleetPolicy runs one Kyverno policy in every cluster its placement selects.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fp,categories=policyhub
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.summary.clusters`
// +kubebuilder:printcolumn:name="Synced",type=integer,JSONPath=`.status.summary.synced`
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.rollout.currentWave`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.summary.violations`
// +kubebuilder:printcolumn:name="Would-Fail",type=integer,priority=1,JSONPath=`.status.preview.wouldFail`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Allows",type=string,priority=1,JSONPath=`.spec.allow`
// +kubebuilder:printcolumn:name="Status",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 || (has(self.spec.template.metadata) && has(self.spec.template.metadata.name) && size(self.spec.template.metadata.name) > 0)",message="metadata.name is longer than 63 characters, the longest policy name Kyverno accepts, and the policy would be named after it: shorten it, or name the policy in spec.template.metadata.name"
type FleetPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the policy and where it runs.
	Spec FleetPolicySpec `json:"spec"`

	// Status is the policy's state in each cluster.
	// +optional
	Status FleetPolicyStatus `json:"status,omitempty"`
}

// FleetPolicyList is a list of FleetPolicy.
// +kubebuilder:object:root=true
type FleetPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetPolicy `json:"items"`
}

// DeclarationStatus points at what the status of every declaration kind holds.
func (fp *FleetPolicy) DeclarationStatus() DeclarationStatus {
	return DeclarationStatus{ObservedGeneration: &fp.Status.ObservedGeneration, Conditions: &fp.Status.Conditions, Summary: &fp.Status.Summary}
}

func init() {
	SchemeBuilder.Register(&FleetPolicy{}, &FleetPolicyList{})
}
