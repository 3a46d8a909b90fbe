package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultApplicationLabel is the label KubeVela puts on an Application's resources.
const DefaultApplicationLabel = "app.oam.dev/name"

// Scope says which of the application's resources a policy applies to.
// +kubebuilder:validation:XValidation:rule="(has(self.kinds) && size(self.kinds) > 0) || (has(self.resources) && size(self.resources) > 0)",message="scope needs kinds or resources (or both): with neither, the policy would match nothing"
type Scope struct {
	// Kinds of the application's resources the rules apply to, e.g. Deployment or apps/v1/Deployment.
	// All kinds share ONE generated policy per target namespace, so they take effect together.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	Kinds []string `json:"kinds,omitempty"`

	// Resources are specific resources of the application. Each gets its OWN generated policy,
	// so each takes effect (and can be rolled back) independently.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Resources []ScopedResource `json:"resources,omitempty"`
}

// ScopedResource is one resource of an application, by kind and name.
type ScopedResource struct {
	// Kind of the resource, e.g. Deployment.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the resource.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Validation is one CEL validation of a policies.kyverno.io/v1 NamespacedValidatingPolicy.
type Validation struct {
	// Expression is a CEL expression that must evaluate to true for an admitted resource,
	// e.g. `object.spec.replicas <= 5`.
	// +kubebuilder:validation:MinLength=1
	Expression string `json:"expression"`
	// Message shown when the expression is false.
	// +optional
	Message string `json:"message,omitempty"`
	// MessageExpression is a CEL expression that builds the message.
	// +optional
	MessageExpression string `json:"messageExpression,omitempty"`
	// Reason of the refusal (e.g. Forbidden, Invalid).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ApplicationRule is one Kyverno rule of an ApplicationPolicy: the kyverno.io/v1 rule schema,
// restricted to validation. The fields a tenant may not use are declared only so that admission
// refuses them with a message (an undeclared field would be dropped silently).
// +kubebuilder:validation:XValidation:rule="has(self.validate)",message="spec.rules[].validate is required: an ApplicationPolicy's rules validate only"
// +kubebuilder:validation:XValidation:rule="!has(self.mutate) && !has(self.generate) && !has(self.verifyImages)",message="spec.rules[] may not mutate, generate or verifyImages: an ApplicationPolicy validates only; ask a hub admin for a FleetPolicy"
// +kubebuilder:validation:XValidation:rule="!has(self.match)",message="spec.rules[].match is not allowed: spec.scope decides what the rules apply to; remove match"
type ApplicationRule struct {
	// Name of the rule, unique in the policy (Kyverno reports results per rule).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Context are variables for the rule; only variable entries (no API calls, ConfigMaps,
	// global context or image registries: they read outside the application's namespace).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Context []RuleContextEntry `json:"context,omitempty"`
	// Preconditions, as Kyverno's (any/all conditions).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Preconditions *apiextensionsv1.JSON `json:"preconditions,omitempty"`
	// CELPreconditions, as Kyverno's (CEL match conditions).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	CELPreconditions []runtime.RawExtension `json:"celPreconditions,omitempty"`
	// Exclude, as Kyverno's: resources of the application the rule leaves alone.
	// +optional
	Exclude *runtime.RawExtension `json:"exclude,omitempty"`
	// Validate is the rule's validation (pattern, anyPattern, deny, foreach, podSecurity, cel,
	// message); its failureAction and failureActionOverrides are set from spec.mode.
	// +optional
	Validate *runtime.RawExtension `json:"validate,omitempty"`
	// SkipBackgroundRequests, as Kyverno's.
	// +optional
	SkipBackgroundRequests *bool `json:"skipBackgroundRequests,omitempty"`
	// ReportProperties are added to the rule's report results.
	// +optional
	// +kubebuilder:validation:MaxProperties=20
	ReportProperties map[string]string `json:"reportProperties,omitempty"`

	// Match is refused: spec.scope decides what the rules apply to.
	// +optional
	Match *runtime.RawExtension `json:"match,omitempty"`
	// Mutate is refused: an ApplicationPolicy validates only.
	// +optional
	Mutate *runtime.RawExtension `json:"mutate,omitempty"`
	// Generate is refused: an ApplicationPolicy validates only.
	// +optional
	Generate *runtime.RawExtension `json:"generate,omitempty"`
	// VerifyImages is refused: it mutates image references and calls registries.
	// +optional
	VerifyImages *runtime.RawExtension `json:"verifyImages,omitempty"`
}

// RuleContextEntry is one context entry of an ApplicationRule: a variable. The other Kyverno
// context sources are declared only so that admission refuses them with a message.
// +kubebuilder:validation:XValidation:rule="!has(self.apiCall) && !has(self.configMap) && !has(self.globalReference) && !has(self.imageRegistry)",message="spec.rules[].context[] may hold only variables: apiCall, configMap, globalReference and imageRegistry read outside the application's namespace"
type RuleContextEntry struct {
	// Name of the entry.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Variable, as Kyverno's (value, jmesPath, default).
	// +optional
	Variable *runtime.RawExtension `json:"variable,omitempty"`
	// APICall is refused.
	// +optional
	APICall *runtime.RawExtension `json:"apiCall,omitempty"`
	// ConfigMap is refused.
	// +optional
	ConfigMap *runtime.RawExtension `json:"configMap,omitempty"`
	// GlobalReference is refused.
	// +optional
	GlobalReference *runtime.RawExtension `json:"globalReference,omitempty"`
	// ImageRegistry is refused.
	// +optional
	ImageRegistry *runtime.RawExtension `json:"imageRegistry,omitempty"`
}

// ApplicationPolicySpec declares policies for one application's resources.
// +kubebuilder:validation:XValidation:rule="has(self.application) && size(self.application) > 0",message="spec.application is required: the name of the application whose resources this policy governs"
// +kubebuilder:validation:XValidation:rule="(has(self.rules) && size(self.rules) > 0) || (has(self.validations) && size(self.validations) > 0)",message="give spec.rules (Kyverno rules) or spec.validations (CEL validations): a policy needs at least one"
// +kubebuilder:validation:XValidation:rule="!(has(self.rules) && size(self.rules) > 0 && has(self.validations) && size(self.validations) > 0)",message="give spec.rules or spec.validations, not both: they render to different Kyverno kinds"
// +kubebuilder:validation:XValidation:rule="has(self.scope)",message="spec.scope is required: list the kinds and/or the resources of the application this policy applies to"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || !has(self.placement.placementRef) || !has(self.placement.placementRef.namespace) || size(self.placement.placementRef.namespace) == 0",message="spec.placement.placementRef.namespace is not allowed: an ApplicationPolicy uses OCM Placements of its own namespace only"
type ApplicationPolicySpec struct {
	// Application is the name of the application. Its resources are those labelled
	// applicationLabel=application.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Application string `json:"application,omitempty"`

	// ApplicationLabel is the label key that ties resources to the application.
	// +optional
	// +kubebuilder:default="app.oam.dev/name"
	// +kubebuilder:validation:MaxLength=317
	ApplicationLabel string `json:"applicationLabel,omitempty"`

	// Mode: Enforce refuses violating resources at admission; Audit admits them and reports.
	// +optional
	// +kubebuilder:default=Audit
	Mode Mode `json:"mode,omitempty"`

	// Scope says which of the application's resources the policy applies to.
	// +optional
	Scope *Scope `json:"scope,omitempty"`

	// Rules are Kyverno validate rules (kyverno.io/v1 rule schema), rendered into a namespaced
	// kyverno.io/v1 Policy. Validation only: a tenant's rules may not mutate, generate, verify
	// images or call out of their namespace (FleetPolicies, which only hub admins create, can).
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Rules []ApplicationRule `json:"rules,omitempty"`

	// Validations are CEL validations, rendered into a policies.kyverno.io/v1 NamespacedValidatingPolicy.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Validations []Validation `json:"validations,omitempty"`

	// Placement selects the clusters. Defaults to the KubeVela Application's topology policies
	// when the application is a KubeVela Application. Either way only clusters and namespaces a
	// TenantGrant gives this namespace are reached; the policies go to the namespace named like
	// this one (or, from a topology, its namespace, when granted).
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// DryRun plans and dry-run applies without persisting anything.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Suspend stops syncing; objects already in the clusters stay as they are.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Prune deletes generated policies that are no longer wanted. Only objects policyhub owns are deleted.
	// +optional
	// +kubebuilder:default=true
	Prune *bool `json:"prune,omitempty"`
}

// ApplicationPolicyResult is the report results of one generated policy in one cluster.
type ApplicationPolicyResult struct {
	// Cluster the results come from.
	Cluster string `json:"cluster"`
	// Policy is the generated Kyverno policy's name.
	Policy string `json:"policy"`
	// Results for this application's resources only.
	Results ResultCounts `json:"results"`
	// Blocked counts admissions of this application's resources the policy refused.
	// +optional
	Blocked int64 `json:"blocked,omitempty"`
	// LastBlocked is the most recent of those refusals, with Kyverno's message.
	// +optional
	LastBlocked *BlockedAdmission `json:"lastBlocked,omitempty"`
}

// ApplicationPolicyStatus is the observed state of an ApplicationPolicy.
type ApplicationPolicyStatus struct {
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

	// Policies are this application's results per generated policy and cluster; at most 100
	// entries. Pass, warn and skip counts are as of the status's last write: they alone do not
	// rewrite it.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Policies []ApplicationPolicyResult `json:"policies,omitempty"`

	// TopViolations are this application's most severe and newest violations; at most 20.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	TopViolations []Violation `json:"topViolations,omitempty"`
}

// ApplicationPolicy applies Kyverno rules to one application's resources, in the clusters the
// application runs in.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ap,categories=policyhub
// +kubebuilder:printcolumn:name="Application",type=string,JSONPath=`.spec.application`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.summary.clusters`
// +kubebuilder:printcolumn:name="Synced",type=integer,JSONPath=`.status.summary.synced`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.summary.violations`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Status",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type ApplicationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the application, its rules and where they run.
	Spec ApplicationPolicySpec `json:"spec"`

	// Status is the sync state and the application's results.
	// +optional
	Status ApplicationPolicyStatus `json:"status,omitempty"`
}

// ApplicationPolicyList is a list of ApplicationPolicy.
// +kubebuilder:object:root=true
type ApplicationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApplicationPolicy `json:"items"`
}

// DeclarationStatus points at what the status of every declaration kind holds.
func (ap *ApplicationPolicy) DeclarationStatus() DeclarationStatus {
	return DeclarationStatus{ObservedGeneration: &ap.Status.ObservedGeneration, Conditions: &ap.Status.Conditions, Summary: &ap.Status.Summary}
}

func init() {
	SchemeBuilder.Register(&ApplicationPolicy{}, &ApplicationPolicyList{})
}
