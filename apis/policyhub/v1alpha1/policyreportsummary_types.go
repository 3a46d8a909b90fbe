package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SummaryName is the name of each cluster's PolicyReportSummary in the cluster's hub namespace;
// the hub aggregates no other (the CRD refuses any other name).
const SummaryName = "summary"

// AgentLeaseName is the coordination.k8s.io Lease each cluster's agent renews in the cluster's hub
// namespace, every heartbeat, beside its summary: liveness is not content, so an agent with nothing
// new to say renews the Lease (as kubelets renew node Leases) and leaves the summary, and everything
// the hub derives from it, untouched. The hub judges an agent's liveness by when it saw the Lease
// (or the summary) change, by its own clock.
const AgentLeaseName = "policyhub-agent"

// ReasonStale is a summary's Ready reason when the hub has not heard from the cluster's agent (its
// Lease or a new summary) for three heartbeats, by the hub's clock: the results are kept and shown
// as stale.
const ReasonStale = "Stale"

// ConditionClockSkew is True on a summary whose spec.generatedAt is far from when the hub saw it:
// the cluster's clock is off. It is informational (it does not make the summary not Ready): the
// hub judges freshness by its own clock, and only Kyverno's result times (oldestResult), which it
// translates by the measured skew, are less exact.
const ConditionClockSkew = "ClockSkew"

// EngineInfo says what policy machinery the cluster runs.
type EngineInfo struct {
	// ReportAPIs are the report APIs the cluster serves, e.g. wgpolicyk8s.io/v1alpha2, openreports.io/v1alpha1.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	ReportAPIs []string `json:"reportAPIs,omitempty"`
	// KyvernoWebhooks is true when Kyverno's admission webhooks are registered in the cluster.
	// +optional
	KyvernoWebhooks bool `json:"kyvernoWebhooks,omitempty"`
	// PolicyAPIs are the Kyverno policy group/versions the cluster serves, e.g. kyverno.io/v1,
	// kyverno.io/v2, policies.kyverno.io/v1beta1, policies.kyverno.io/v1.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	PolicyAPIs []string `json:"policyAPIs,omitempty"`
	// Kyverno is what the cluster's Kyverno says of itself (its version and the settings the hub
	// relies on); absent when the agent found no Kyverno admission controller.
	// +optional
	Kyverno *KyvernoFacts `json:"kyverno,omitempty"`
	// Engines are the policy engines that run in the cluster: Kyverno (its admission webhooks
	// registered), Kubernetes (the API server serves admissionregistration.k8s.io/v1
	// ValidatingAdmissionPolicy) and Gatekeeper (its Constraint API served).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	Engines []PolicyEngine `json:"engines,omitempty"`
	// Gatekeeper is what the cluster's Gatekeeper says of itself; absent when it runs none.
	// +optional
	Gatekeeper *GatekeeperFacts `json:"gatekeeper,omitempty"`
	// AdmissionPolicies is what the agent reads of the API server's own admission policies;
	// absent when the cluster serves none.
	// +optional
	AdmissionPolicies *AdmissionPolicyFacts `json:"admissionPolicies,omitempty"`
	// Legacy is the cluster's inventory of Kyverno's legacy objects (the kyverno.io kinds Kyverno
	// 1.20 no longer executes and whose presence stops its Helm upgrade), owned by policyhub or not;
	// absent when the agent could not read them.
	// +optional
	Legacy *LegacyInventory `json:"legacy,omitempty"`
}

// KyvernoFacts is what a cluster's Kyverno says of itself, read by the agent from the cluster.
type KyvernoFacts struct {
	// Version of Kyverno's admission controller, e.g. v1.19.1; empty when it could not be told.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^(v?[0-9]+\.[0-9]+(\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?)?$`
	Version string `json:"version,omitempty"`
	// VersionSource says where version was read, e.g. "image tag of Deployment kyverno/kyverno-admission-controller".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	VersionSource string `json:"versionSource,omitempty"`
	// PolicyExceptions says whether Kyverno's --enablePolicyException is on; absent when unknown.
	// +optional
	PolicyExceptions *bool `json:"policyExceptions,omitempty"`
	// ExceptionNamespace is Kyverno's --exceptionNamespace ("" when exceptions are read from every namespace).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ExceptionNamespace string `json:"exceptionNamespace,omitempty"`
	// ReportedResults are the results Kyverno's reports controller writes (its --allowedResults);
	// absent when it writes every kind. A kind absent here is unknown in the summary, not zero.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Enum=pass;fail;warn;error;skip
	ReportedResults []string `json:"reportedResults,omitempty"`
	// DryRunsCounted says whether the agent could count server-side dry-runs apart from refused
	// admissions (from the admission controller's metrics, kyverno_policy_results_total): true,
	// false (then blocked counts include dry-runs, and dryRunsNotCounted says why), or absent
	// when not looked at (an agent older than the field).
	// +optional
	DryRunsCounted *bool `json:"dryRunsCounted,omitempty"`
	// DryRunsNotCounted says why dry-runs could not be counted apart, e.g. the metrics endpoint
	// unreachable.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DryRunsNotCounted string `json:"dryRunsNotCounted,omitempty"`
}

// MaxLegacyNames bounds the legacy objects a summary names (the counts cover every one).
const MaxLegacyNames = 50

// LegacyInventory counts a cluster's Kyverno legacy objects and names some of them.
type LegacyInventory struct {
	// Counts are the legacy objects by kind and owner; at most 10 entries.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=owner
	// +kubebuilder:validation:MaxItems=10
	Counts []LegacyCount `json:"counts,omitempty"`
	// Objects names the legacy objects, those not owned by policyhub first, then by kind,
	// namespace and name; at most 50 (MaxLegacyNames): counts covers the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Objects []LegacyObject `json:"objects,omitempty"`
}

// LegacyOwner says who owns a legacy object: policyhub (it carries policyhub's managed-by label)
// or someone else.
// +kubebuilder:validation:Enum=policyhub;other
type LegacyOwner string

const (
	LegacyOwnerPolicyhub LegacyOwner = "policyhub"
	LegacyOwnerOther     LegacyOwner = "other"
)

// LegacyCount counts the legacy objects of one kind and one owner.
type LegacyCount struct {
	// Kind is one of LegacyKinds: ClusterPolicy, Policy, ClusterCleanupPolicy, CleanupPolicy, PolicyException.
	// +kubebuilder:validation:Enum=ClusterPolicy;Policy;ClusterCleanupPolicy;CleanupPolicy;PolicyException
	Kind string `json:"kind"`
	// Owner of the objects counted.
	Owner LegacyOwner `json:"owner"`
	// Count of them.
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`
}

// LegacyObject is one legacy object.
type LegacyObject struct {
	// Kind, as in LegacyCount.
	// +kubebuilder:validation:Enum=ClusterPolicy;Policy;ClusterCleanupPolicy;CleanupPolicy;PolicyException
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped kinds.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Owner of the object.
	Owner LegacyOwner `json:"owner"`
}

// PolicySummary is the results of one policy in the cluster.
type PolicySummary struct {
	// Name of the policy.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the policy; empty for cluster-scoped policies.
	// +optional
	// +kubebuilder:default=""
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Kind of the policy, e.g. ClusterPolicy or ValidatingPolicy; empty when the reports did not say.
	// +optional
	// +kubebuilder:default=""
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// Engine that enforces and reports the policy; empty means Kyverno (agents name only the
	// others, and agents older than the field reported Kyverno's results only).
	// +optional
	Engine PolicyEngine `json:"engine,omitempty"`
	// Title from the policy's policies.kyverno.io/title annotation.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`
	// Category from the policies.kyverno.io/category annotation or the results, cut to 128 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Category string `json:"category,omitempty"`
	// Severity from the policies.kyverno.io/severity annotation or the results, cut to 64 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Severity string `json:"severity,omitempty"`
	// Results counts the policy's results by kind of result.
	Results ResultCounts `json:"results"`
	// OldestResult is when Kyverno made the oldest of the policy's results: every result is at
	// least this recent. Kyverno evaluates every resource again when a policy changes, so once
	// it is later than the change, all the results are of the policy's current version.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	OldestResult *metav1.Time `json:"oldestResult,omitempty"`
	// Blocked counts admissions the policy refused (Enforce denials write no report) over the
	// Events Kyverno keeps (about an hour), server-side dry-runs (kubectl apply --dry-run=server)
	// taken out where the agent could count them (spec.engine.kyverno.dryRunsCounted: for the
	// legacy kinds ClusterPolicy and Policy, from Kyverno's kyverno_policy_results_total; the CEL
	// kinds' refusals include their dry-runs, since Kyverno's metric does not mark them).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Blocked int64 `json:"blocked,omitempty"`
	// BlockedDryRuns counts the server-side dry-runs among the policy's refusals over the same
	// window, apart from blocked (legacy kinds only; see blocked).
	// +optional
	// +kubebuilder:validation:Minimum=0
	BlockedDryRuns int64 `json:"blockedDryRuns,omitempty"`
	// LastBlocked is the policy's most recent refused admission.
	// +optional
	LastBlocked *BlockedAdmission `json:"lastBlocked,omitempty"`
}

// BlockedAdmission is one admission a policy refused, from Kyverno's Event.
type BlockedAdmission struct {
	// Resource that was refused.
	// +optional
	Resource *ResourceRef `json:"resource,omitempty"`
	// Message is Kyverno's, cut to 512 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// Time of the refusal.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	Time *metav1.Time `json:"time,omitempty"`
}

// ApplicationSummary is the results of one policy for one application's resources.
type ApplicationSummary struct {
	// Namespace of the application's resources.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the application (the value of its application label).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Policy whose results these are: name, or namespace/name for a namespaced policy.
	// +kubebuilder:validation:MaxLength=317
	Policy string `json:"policy"`
	// Results counts the results by kind of result.
	Results ResultCounts `json:"results"`
	// Blocked counts admissions of the application's resources the policy refused.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Blocked int64 `json:"blocked,omitempty"`
}

// ExceptionResults is how many results one Kyverno PolicyException turned into skip (or pass,
// when the exception says reportResult: pass) in the cluster.
type ExceptionResults struct {
	// Name of the exception as Kyverno's reports name it: its name alone, without its namespace
	// (exceptions of one name in two namespaces are counted as one).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Results counts the results the exception exempted: skip (or pass) results whose
	// properties name it.
	// +kubebuilder:validation:Minimum=0
	Results int64 `json:"results"`
}

// NamespaceSummary is the results of one namespace's resources, every policy together.
type NamespaceSummary struct {
	// Namespace of the resources.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Results counts the namespace's results by kind of result.
	Results ResultCounts `json:"results"`
	// Blocked counts admissions in the namespace that Kyverno refused.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Blocked int64 `json:"blocked,omitempty"`
}

// Truncation says what the agent cut to keep the summary bounded.
type Truncation struct {
	// Policies left out of spec.policies.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Policies int32 `json:"policies,omitempty"`
	// Applications left out of spec.applications.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Applications int32 `json:"applications,omitempty"`
	// Namespaces left out of spec.namespaces.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Namespaces int32 `json:"namespaces,omitempty"`
	// Violations left out of spec.violations.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Violations int64 `json:"violations,omitempty"`
	// Exceptions left out of spec.exceptions.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Exceptions int32 `json:"exceptions,omitempty"`
	// Shadows is how many preview shadows were left out of spec.shadows (past 50, or to fit the
	// size bound): the hub does not count such a cluster as having reported them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Shadows int32 `json:"shadows,omitempty"`
}

// PolicyReportSummarySpec is one cluster's compliance, as its agent saw it.
//
// Atomic for server-side apply: its one writer, the agent, always writes it whole, and tracking
// the ownership of every policy entry apart cost the hub's API server ~44 % of each summary
// write (docs/benchmarks.md, summary writes by shape: 28 ms a write against 15.5 ms atomic).
// +structType=atomic
// +kubebuilder:validation:XValidation:rule="has(self.cluster) && size(self.cluster) > 0",message="spec.cluster is required: the name of the managed cluster this summary describes"
type PolicyReportSummarySpec struct {
	// Cluster is the managed cluster the summary describes; it must match the hub namespace it is written to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// GeneratedAt is when the agent built the summary, by the cluster's clock. The hub judges
	// freshness by status.observedTime (its own clock) and uses generatedAt only to measure the
	// cluster's clock skew.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	GeneratedAt *metav1.Time `json:"generatedAt,omitempty"`

	// HeartbeatInterval is how often the agent renews its Lease (policyhub-agent, in this
	// namespace) to say it is alive; it rewrites the summary only when its content changes. The
	// hub marks the cluster's results Stale when it has neither seen the Lease renewed nor a new
	// summary for three of these, by its own clock; absent means 1m, and the hub takes at most 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}h([0-9]{1,5}m)?([0-9]{1,5}(\.[0-9]{1,9})?s)?|[0-9]{1,5}m([0-9]{1,5}(\.[0-9]{1,9})?s)?|[0-9]{1,5}(\.[0-9]{1,9})?(s|ms))$`
	// +kubebuilder:validation:MaxLength=64
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`

	// ContentHash is a hash of the summary's content, so unchanged summaries are not pushed again.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ContentHash string `json:"contentHash,omitempty"`

	// Engine says which report APIs the cluster serves and whether Kyverno's webhooks are present.
	// +optional
	Engine EngineInfo `json:"engine,omitempty"`

	// Totals counts every result in the cluster.
	// +optional
	Totals ResultCounts `json:"totals,omitempty"`

	// Blocked counts admissions refused by Kyverno in the cluster, the sum of policies[].blocked
	// over every policy (also those the list leaves out): from its Events, server-side dry-runs
	// taken out where they could be counted (see policies[].blocked and
	// engine.kyverno.dryRunsCounted).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Blocked int64 `json:"blocked,omitempty"`
	// BlockedDryRuns counts the server-side dry-runs Kyverno refused, taken out of blocked.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BlockedDryRuns int64 `json:"blockedDryRuns,omitempty"`

	// Policies are the results per policy; at most 1000 entries, one per name, namespace and kind.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=namespace
	// +listMapKey=kind
	// +kubebuilder:validation:MaxItems=1000
	Policies []PolicySummary `json:"policies,omitempty"`

	// Applications are the results per application and policy; at most 2000 entries, one per
	// namespace, name and policy.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +listMapKey=policy
	// +kubebuilder:validation:MaxItems=2000
	Applications []ApplicationSummary `json:"applications,omitempty"`

	// Namespaces are the results per namespace of the namespaced resources reported, every policy
	// together; at most 1000 entries, those with the most fail and error results kept, one per
	// namespace.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +kubebuilder:validation:MaxItems=1000
	Namespaces []NamespaceSummary `json:"namespaces,omitempty"`

	// Violations are the top fail and error results, most severe and newest first; at most 200.
	// +optional
	// +kubebuilder:validation:MaxItems=200
	Violations []Violation `json:"violations,omitempty"`

	// Exceptions are the results each Kyverno PolicyException turned into skip (or pass) in the
	// cluster, by the exception's name as Kyverno's reports name it (no namespace): the
	// exceptions with the most results first, ties by name; at most 200, one per name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=200
	Exceptions []ExceptionResults `json:"exceptions,omitempty"`

	// Shadows are the results of the report-only shadows policyhub shipped (their names start
	// with policyhub-shadow-), each compared per resource with the live policy it shadows. They
	// are in no other field: a shadow's results never count as compliance. At most 50.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Shadows []ShadowResults `json:"shadows,omitempty"`

	// Truncated says what was cut to keep the summary bounded; absent when nothing was.
	// +optional
	Truncated *Truncation `json:"truncated,omitempty"`
}

// PolicyReportSummaryStatus is set by the hub when it aggregates the summary.
type PolicyReportSummaryStatus struct {
	// ObservedGeneration is the generation of the summary the hub last aggregated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedTime is when the hub first saw observedGeneration of the summary, by the hub's
	// clock (in microseconds: a rollout compares it with when a policy arrived in the cluster).
	// The hub judges the cluster's results fresh or stale by it, never by the agent's clock
	// (spec.generatedAt).
	// +optional
	ObservedTime *metav1.MicroTime `json:"observedTime,omitempty"`

	// Conditions: Ready when aggregated; Stalled with the reason when refused (e.g. spec.cluster
	// does not match the namespace); ClockSkew True when spec.generatedAt and observedTime are
	// further apart than two minutes and a heartbeat (the cluster's clock is off).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Pacing is how often the hub asks the cluster's agent to write: its share of the fleet's
	// summary and renewal budgets (see SummaryPacing). The agent reads it back from its writes.
	// +optional
	Pacing *SummaryPacing `json:"pacing,omitempty"`
}

// PolicyReportSummary is a bounded summary of one managed cluster's policy reports, written by the
// cluster's agent into the cluster's namespace on the hub, under the name summary.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'summary'",message="metadata.name must be summary: the hub reads only the summary of that name in each cluster's namespace"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=prs,categories=policyhub
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Pass",type=integer,JSONPath=`.spec.totals.pass`
// +kubebuilder:printcolumn:name="Fail",type=integer,JSONPath=`.spec.totals.fail`
// +kubebuilder:printcolumn:name="Warn",type=integer,JSONPath=`.spec.totals.warn`
// +kubebuilder:printcolumn:name="Error",type=integer,JSONPath=`.spec.totals.error`
// +kubebuilder:printcolumn:name="Blocked",type=integer,JSONPath=`.spec.blocked`
// +kubebuilder:printcolumn:name="Generated",type=date,JSONPath=`.spec.generatedAt`
// +kubebuilder:printcolumn:name="Observed",type=date,JSONPath=`.status.observedTime`
// +kubebuilder:printcolumn:name="Push",type=string,JSONPath=`.status.pacing.pushInterval`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=string,JSONPath=`.status.pacing.heartbeatInterval`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyReportSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the cluster's compliance summary.
	Spec PolicyReportSummarySpec `json:"spec"`

	// Status is the hub's verdict on the summary.
	// +optional
	Status PolicyReportSummaryStatus `json:"status,omitempty"`
}

// PolicyReportSummaryList is a list of PolicyReportSummary.
// +kubebuilder:object:root=true
type PolicyReportSummaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyReportSummary `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PolicyReportSummary{}, &PolicyReportSummaryList{})
}
