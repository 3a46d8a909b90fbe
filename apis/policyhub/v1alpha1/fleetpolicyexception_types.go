package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindFleetPolicyException is the kind of a fleet exception, as sources and slices name it.
const KindFleetPolicyException = "FleetPolicyException"

// The states of a FleetPolicyException (status.state), derived by the hub from its approval and
// its end date on the hub's clock: only an Active exception is in any cluster.
const (
	ExceptionPending = "Pending"
	ExceptionActive  = "Active"
	ExceptionDenied  = "Denied"
	ExceptionRevoked = "Revoked"
	ExceptionExpired = "Expired"
	ExceptionInvalid = "Invalid"
)

// The decisions an approver writes in status.approval.decision.
const (
	DecisionApproved = "Approved"
	DecisionDenied   = "Denied"
	DecisionRevoked  = "Revoked"
)

// ConditionApproved says whether the exception's current generation is approved, by whom.
const ConditionApproved = "Approved"

// Reasons of the Approved condition beyond the exception states: no approval counts.
const (
	// ReasonFenceMissing: the admission policies that check who decides (the fence) are not in
	// place on the hub, so the hub counts no approval of any exception.
	ReasonFenceMissing = "FenceMissing"
	// ReasonNotApprovable: who requested or changed the spec may never have it approved (a
	// ServiceAccount the hub admin did not allow).
	ReasonNotApprovable = "NotApprovable"
	// ReasonUncheckedApproval: the approval was written while the fence was missing.
	ReasonUncheckedApproval = "UncheckedApproval"
)

// MaxExceptionWriters bounds spec.changedBy: how many users other than the requester may change
// an exception's spec.
const MaxExceptionWriters = 16

// DefaultMaxExceptionLifetime bounds how far ahead of its creation an exception may end, unless
// the hub admin configures another bound (the hub's --max-exception-lifetime and the chart's
// admission policy).
const DefaultMaxExceptionLifetime = 90 * 24 * time.Hour

// FleetPolicyExceptionSpec says what is exempted from which policy, where, why and until when.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.requestedBy) || (has(self.requestedBy) && self.requestedBy == oldSelf.requestedBy)",message="spec.requestedBy is the exception's first requester and cannot change: request a new exception"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.changedBy) || (has(self.changedBy) && oldSelf.changedBy.all(u, u in self.changedBy))",message="spec.changedBy lists everyone who changed the spec of someone else's request: nobody can be removed from it"
type FleetPolicyExceptionSpec struct {
	// Target is the policy exempted from: a FleetPolicy's, or one member of a PolicySet.
	Target ExceptionTarget `json:"target"`

	// Resources are the resources exempted, in the clusters chosen.
	Resources ExceptionResources `json:"resources"`

	// Clusters are where the exception applies, within the clusters the target's policy runs in:
	// named, or selected by label ({} selects every cluster the policy runs in).
	Clusters ExceptionClusters `json:"clusters"`

	// Owner is the team or person accountable for the exception.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`\S`
	Owner string `json:"owner"`

	// Reason says why the exemption is needed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`\S`
	Reason string `json:"reason"`

	// Ticket is where the exception is tracked (an issue, a change request).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`\S`
	Ticket string `json:"ticket"`

	// ExpiresAt is when the exception ends: the hub removes it from every cluster then. It must
	// be after the exception's creation and at most the hub's maximum lifetime after it (90 days
	// unless the hub admin set another).
	ExpiresAt metav1.Time `json:"expiresAt"`

	// RequestedBy is who created the exception: its requester, who may not decide on it. Set once
	// and never changed: stamped by the hub's admission policy where the hub serves
	// MutatingAdmissionPolicy (Kubernetes 1.36+), else the writer sets it to itself and admission
	// checks it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	RequestedBy string `json:"requestedBy,omitempty"`

	// ChangedBy are the users other than the requester who changed the spec since, in order, each
	// once: none of them may decide on it either. Appended by the hub's admission policy (or, on a
	// hub without MutatingAdmissionPolicy, by the writer, and checked); never shortened. A spec
	// changed by MaxExceptionWriters others is refused: request a new exception.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	ChangedBy []string `json:"changedBy,omitempty"`
}

// ExceptionTarget names the policy exempted from.
// +kubebuilder:validation:XValidation:rule="(self.kind == 'PolicySet') == has(self.member)",message="spec.target.member names the PolicySet member exempted from: required for a PolicySet target, and only for one"
type ExceptionTarget struct {
	// Kind of the declaration: FleetPolicy or PolicySet.
	// +kubebuilder:validation:Enum=FleetPolicy;PolicySet
	Kind string `json:"kind"`

	// Name of the FleetPolicy or PolicySet.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Member of the PolicySet exempted from; the exception follows it across the set's versions
	// while it keeps its name.
	// +optional
	Member *MemberRef `json:"member,omitempty"`

	// Rules of a kyverno.io policy exempted from (wildcards allowed); none means every rule.
	// The rules Kyverno generates for Pod controllers (autogen-…) are included. A
	// policies.kyverno.io policy is exempted from as a whole: rules are refused for it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Rules []string `json:"rules,omitempty"`
}

// ExceptionResources narrow the resources exempted: every field given must match.
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="spec.resources.selector is empty: give matchLabels or matchExpressions"
// +kubebuilder:validation:XValidation:rule="(has(self.namespaces) && size(self.namespaces) > 0) || (has(self.names) && size(self.names) > 0) || has(self.selector) || (has(self.matchConditions) && size(self.matchConditions) > 0)",message="spec.resources must narrow the exception: give namespaces, names, a selector or matchConditions"
type ExceptionResources struct {
	// Namespaces of the resources ('*' and '?' wildcards for the hub admin's exceptions only). A
	// tenant's exception reaches only namespaces granted to it, and without namespaces only the
	// namespace named like its own.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// Kinds of the resources, e.g. Deployment or apps/v1/Deployment; none means every kind the
	// policy matches.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=127
	Kinds []string `json:"kinds,omitempty"`

	// Names of the resources ('*' and '?' wildcards).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`

	// Selector selects the resources by their labels.
	// +optional
	Selector *ClusterSelector `json:"selector,omitempty"`

	// MatchConditions are CEL expressions over the admission request (object, oldObject, request),
	// all of which must be true for a resource to be exempted. For a policies.kyverno.io policy
	// only (Kyverno's kyverno.io exceptions have no CEL conditions).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, !c.name.startsWith('policyhub-'))",message="spec.resources.matchConditions: names starting with policyhub- are the hub's own"
	MatchConditions []ExceptionMatchCondition `json:"matchConditions,omitempty"`
}

// ExceptionMatchCondition is a named CEL expression a resource must meet to be exempted.
type ExceptionMatchCondition struct {
	// Name of the condition, unique in the list.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Name string `json:"name"`
	// Expression is CEL that evaluates to a boolean, e.g. `object.metadata.labels['tier'] == 'edge'`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Expression string `json:"expression"`
}

// ExceptionClusters choose the clusters an exception applies in, among those its target's
// policy runs in.
// +kubebuilder:validation:XValidation:rule="(has(self.names) && size(self.names) > 0) || has(self.clusterSelector)",message="spec.clusters: name clusters, or give a clusterSelector ({} selects every cluster the policy runs in)"
type ExceptionClusters struct {
	// Names of clusters.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`

	// ClusterSelector selects clusters by their labels, as a placement's does.
	// +optional
	ClusterSelector *ClusterSelector `json:"clusterSelector,omitempty"`
}

// ExceptionApproval is an approver's decision on one generation of the exception's spec. Only a
// user allowed verb approve on fleetpolicyexceptions may write it, never the requester (the
// hub's admission policy); a new spec generation needs a new decision.
type ExceptionApproval struct {
	// Decision: Approved, Denied, or Revoked (an approval withdrawn).
	// +kubebuilder:validation:Enum=Approved;Denied;Revoked
	Decision string `json:"decision"`

	// By is the user who decided: the user writing it (admission checks).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	By string `json:"by"`

	// Generation is the spec generation decided on.
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`

	// At is when the approver decided, by the approver's clock (the hub's Event records when the
	// hub saw it).
	// +optional
	At *metav1.Time `json:"at,omitempty"`

	// Comment from the approver.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Comment string `json:"comment,omitempty"`
}

// FleetPolicyExceptionStatus is the exception's approval, its state on the hub's clock, and
// where it is in force.
type FleetPolicyExceptionStatus struct {
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (in force in every cluster it applies to), Approved, Reconciling and
	// Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Approval is the approver's decision, written through the status subresource by an approver
	// (never by the hub).
	// +optional
	Approval *ExceptionApproval `json:"approval,omitempty"`

	// UncheckedApproval is an approval the hub saw while the admission fence was missing (so
	// nobody checked who wrote it or whether they may): it never counts, even once the fence is
	// back; a new decision replaces it. Written by the hub; admission keeps it while the approval
	// is the one it names.
	// +optional
	UncheckedApproval *ExceptionApproval `json:"uncheckedApproval,omitempty"`

	// State is Pending (awaiting approval of this generation), Active, Denied, Revoked, Expired or
	// Invalid, on the hub's clock. Invalid: approved or not, it can take effect nowhere as it
	// stands (its spec is refused, or not one of its places is granted to its namespace); the
	// Ready condition says why.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Active;Denied;Revoked;Expired;Invalid
	State string `json:"state,omitempty"`

	// Policy is the Kyverno policy exempted from, as kind/name or kind/namespace/name.
	// +optional
	// +kubebuilder:validation:MaxLength=400
	Policy string `json:"policy,omitempty"`

	// InForce is how many clusters hold the exception.
	// +optional
	InForce int32 `json:"inForce,omitempty"`

	// Exempted is how many report results the exception turned into skip, over the clusters it
	// is in, as their agents last reported (Kyverno marks the results an exception exempted).
	// +optional
	Exempted int64 `json:"exempted,omitempty"`

	// Summary counts the clusters by phase and names the ones that need attention.
	// +optional
	Summary StatusSummary `json:"summary,omitempty"`
}

// FleetPolicyException exempts chosen resources, in chosen clusters, from a policy the hub runs
// there: owned, reasoned, ticketed, approved by someone other than its requester, and ended by
// the hub at expiresAt in every cluster. The hub renders Kyverno's PolicyException kinds for it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fpex,categories=policyhub
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target.name`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="InForce",type=integer,JSONPath=`.status.inForce`
// +kubebuilder:printcolumn:name="Exempted",type=integer,JSONPath=`.status.exempted`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Ticket",type=string,priority=1,JSONPath=`.spec.ticket`
// +kubebuilder:printcolumn:name="Requested-By",type=string,priority=1,JSONPath=`.spec.requestedBy`
// +kubebuilder:printcolumn:name="Approved-By",type=string,priority=1,JSONPath=`.status.approval.by`
// +kubebuilder:printcolumn:name="Status",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type FleetPolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the exemption asked for.
	Spec FleetPolicyExceptionSpec `json:"spec"`

	// Status is its approval and where it is in force.
	// +optional
	Status FleetPolicyExceptionStatus `json:"status,omitempty"`
}

// FleetPolicyExceptionList is a list of FleetPolicyException.
// +kubebuilder:object:root=true
type FleetPolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetPolicyException `json:"items"`
}

// DeclarationStatus points at what the status of every declaration kind holds.
func (ex *FleetPolicyException) DeclarationStatus() DeclarationStatus {
	return DeclarationStatus{ObservedGeneration: &ex.Status.ObservedGeneration, Conditions: &ex.Status.Conditions, Summary: &ex.Status.Summary}
}

func init() {
	SchemeBuilder.Register(&FleetPolicyException{}, &FleetPolicyExceptionList{})
}
