package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Condition types, kstatus-compatible: tools such as kstatus, Flux and Argo CD read these.
const (
	// ConditionReady is True when every selected cluster holds the desired state.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller works towards the desired state.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a change by the user (e.g. an invalid template).
	ConditionStalled = "Stalled"
)

// Labels and annotations policyhub puts on every object it writes in a managed cluster.
const (
	// LabelManagedBy names the hub that owns an object. An object is policyhub's only if it carries
	// this label with the hub's id; anything else is never updated or deleted.
	LabelManagedBy = "policyhub.io/managed-by"
	// LabelSourceKind, LabelSourceNamespace and LabelSourceName name the declaration an object was
	// rendered from, for selecting with kubectl; the name label is left out when the name is longer
	// than a label value may be. AnnotationSource is the authoritative reference.
	LabelSourceKind      = "policyhub.io/source-kind"
	LabelSourceNamespace = "policyhub.io/source-namespace"
	LabelSourceName      = "policyhub.io/source-name"
	// AnnotationSource names the declaration an object was rendered from: Kind/name or Kind/namespace/name.
	AnnotationSource = "policyhub.io/source"
	// AnnotationContentHash is the hash of the rendered content.
	AnnotationContentHash = "policyhub.io/content-hash"
)

// OwnedBy says whether obj is the hub hubID's: it carries LabelManagedBy with that id. The one
// test of ownership, wherever an object is about to be updated, deleted or counted as ours.
func OwnedBy(obj interface{ GetLabels() map[string]string }, hubID string) bool {
	return hubID != "" && obj.GetLabels()[LabelManagedBy] == hubID
}

// The Lease every writer of a managed cluster (hub replicas, other hubs, the CLI) takes in that
// cluster before writing: SyncLeaseNamespace/SyncLeaseName. The policies the hub ships exempt
// both (render), so that no policy can lock the hub out of the cluster it would have to fix.
const (
	SyncLeaseNamespace = "policyhub-system"
	SyncLeaseName      = "policyhub-sync"
)

// The hub publishes its id on the hub, so that the CLI need not be told it: a ConfigMap
// HubInfoName in the hub's namespace, labelled LabelHubInfo, its id under HubInfoIDKey.
const (
	// DefaultHubID is policyhub-hub's --hub-id when none is given.
	DefaultHubID = "policyhub"
	// DefaultHubNamespace is the hub's namespace on the hub when none is given (policyhub-hub's
	// --leader-election-namespace, the CLI's --hub-namespace; the chart's is its release's).
	DefaultHubNamespace = "policyhub-system"
	HubInfoName         = "policyhub-hub-info"
	LabelHubInfo        = "policyhub.io/hub-info"
	HubInfoIDKey        = "hubID"
)

// FluxSourceGroupVersion is Flux's source API: the GitRepository, OCIRepository and Bucket a
// PolicySet's spec.source.fluxSource names are read in it (their status.artifact).
var FluxSourceGroupVersion = schema.GroupVersion{Group: "source.toolkit.fluxcd.io", Version: "v1"}

// KubeVelaApplicationGVK is KubeVela's Application: its topology policies place an
// ApplicationPolicy without a placement of its own, and the hub mirrors results into its status.
var KubeVelaApplicationGVK = schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"}

// KubeVela's side of an ApplicationPolicy made for a KubeVela Application's policy entry.
const (
	// KubeVelaPolicyType is the type of the Application spec.policies entries that are
	// ApplicationPolicies (config/kubevela's PolicyDefinition: KubeVela applies its output).
	KubeVelaPolicyType = "kyverno-policy"
	// AnnotationKubeVelaPolicyEntry holds, on an ApplicationPolicy KubeVela applied for an entry,
	// the entry's name: the hub mirrors the ApplicationPolicy's status into the Application's
	// status.policy under it.
	AnnotationKubeVelaPolicyEntry = "policyhub.io/kubevela-policy-entry"
)

// Mode says what a policy does with a violating resource.
// +kubebuilder:validation:Enum=Audit;Enforce
type Mode string

const (
	// ModeAudit admits violating resources and reports them.
	ModeAudit Mode = "Audit"
	// ModeEnforce refuses violating resources at admission.
	ModeEnforce Mode = "Enforce"
)

// Placement selects managed clusters. The selected set is the union of clusters, clusterSelector
// and placementRef; an empty placement selects no cluster (never "all" by accident).
// +kubebuilder:validation:XValidation:rule="!has(self.clusterSelector) || (has(self.clusterSelector.matchLabels) && size(self.clusterSelector.matchLabels) > 0) || (has(self.clusterSelector.matchExpressions) && size(self.clusterSelector.matchExpressions) > 0)",message="placement.clusterSelector is empty and would select every cluster; give matchLabels or matchExpressions, or list clusters by name"
type Placement struct {
	// Clusters names managed clusters, as registered with cluster-gateway (the name of the
	// cluster's credential Secret, or of its OCM ManagedCluster).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Clusters []string `json:"clusters,omitempty"`

	// ClusterSelector selects managed clusters by their labels: the labels on the cluster's
	// cluster-gateway credential Secret, and on its OCM ManagedCluster where OCM is installed.
	// It must require a label (a matchLabels entry, or a matchExpressions entry with operator In
	// or Exists): NotIn and DoesNotExist alone select every cluster without the label.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || !has(self.matchExpressions) || size(self.matchExpressions) == 0 || self.matchExpressions.exists(e, e.operator == 'In' || e.operator == 'Exists')",message="placement.clusterSelector has only NotIn or DoesNotExist requirements and would select every cluster without those labels: add a matchLabels entry or a matchExpressions entry with operator In or Exists, or list clusters by name"
	ClusterSelector *ClusterSelector `json:"clusterSelector,omitempty"`

	// PlacementRef selects the clusters of an OCM Placement's PlacementDecisions.
	// +optional
	PlacementRef *PlacementRef `json:"placementRef,omitempty"`
}

// ClusterSelector selects clusters by their labels. It is metav1.LabelSelector with the same
// fields and YAML, and matchExpressions bounded: the apiserver refuses a CEL rule that walks an
// unbounded list inside a list (clusterOverrides, rollout waves) as too expensive, and admission
// must walk it to check that the selector requires a label (see the rules where it is used).
// +structType=atomic
type ClusterSelector struct {
	// MatchLabels: a cluster matches when it has each of these labels with the value given.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchExpressions are label requirements (operator In, NotIn, Exists or DoesNotExist), ANDed
	// with each other and with matchLabels.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelector is the selector as apimachinery's type, to convert into a labels.Selector.
func (s *ClusterSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	return &metav1.LabelSelector{MatchLabels: s.MatchLabels, MatchExpressions: s.MatchExpressions}
}

// RequiresLabel says whether the selector requires a label to be present: a matchLabels entry, or
// a matchExpressions entry with operator In or Exists. One that does not (empty, or only NotIn and
// DoesNotExist) selects every cluster without some label, which is the whole fleet by accident.
func (s *ClusterSelector) RequiresLabel() bool {
	if s == nil {
		return false
	}
	if len(s.MatchLabels) > 0 {
		return true
	}
	for _, e := range s.MatchExpressions {
		if e.Operator == metav1.LabelSelectorOpIn || e.Operator == metav1.LabelSelectorOpExists {
			return true
		}
	}
	return false
}

// PlacementRef refers to an OCM Placement (cluster.open-cluster-management.io/v1beta1).
type PlacementRef struct {
	// Name of the Placement.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Placement. Required on cluster-scoped declarations; defaults to the
	// declaration's own namespace on namespaced ones.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// ClusterPhase is the sync state of one declaration in one cluster.
// +kubebuilder:validation:Enum=Pending;Synced;DryRun;Failed;Conflict;Unsupported;NotEnforced;LockHeld
type ClusterPhase string

const (
	// ClusterPhasePending: selected, not synced yet.
	ClusterPhasePending ClusterPhase = "Pending"
	// ClusterPhaseSynced: the cluster holds the desired objects.
	ClusterPhaseSynced ClusterPhase = "Synced"
	// ClusterPhaseDryRun: planned and dry-run applied; nothing persisted.
	ClusterPhaseDryRun ClusterPhase = "DryRun"
	// ClusterPhaseFailed: the sync failed (unreachable cluster, refused apply...); retried with backoff.
	ClusterPhaseFailed ClusterPhase = "Failed"
	// ClusterPhaseConflict: an object of the same group, kind, namespace and name exists that
	// policyhub does not own; it is left untouched.
	ClusterPhaseConflict ClusterPhase = "Conflict"
	// ClusterPhaseUnsupported: the cluster does not serve the kind (e.g. an older Kyverno).
	ClusterPhaseUnsupported ClusterPhase = "Unsupported"
	// ClusterPhaseNotEnforced: the cluster serves the kind but its engine no longer enforces it
	// (Kyverno 1.20's legacy kinds): unprotected; nothing is rewritten there until something changes.
	ClusterPhaseNotEnforced ClusterPhase = "NotEnforced"
	// ClusterPhaseLockHeld: another writer holds the cluster's sync Lease; retried.
	ClusterPhaseLockHeld ClusterPhase = "LockHeld"
)

// problemRank orders the phases that need attention, worst first (higher is worse); the phases
// absent are fine (Synced, DryRun). The one ranking of phases: status, metrics and the CLI use it.
var problemRank = map[ClusterPhase]int{
	ClusterPhaseFailed: 7, ClusterPhaseConflict: 6, ClusterPhaseNotEnforced: 5, ClusterPhaseUnsupported: 4, ClusterPhaseLockHeld: 3, ClusterPhasePending: 2,
}

// ProblemRank is how badly the phase needs attention: 0 for Synced and DryRun, then Pending,
// LockHeld, Unsupported, NotEnforced, Conflict and Failed, worst.
func (p ClusterPhase) ProblemRank() int { return problemRank[p] }

// Done says whether the cluster holds the declaration as asked (Synced, or planned in DryRun).
func (p ClusterPhase) Done() bool { return p == ClusterPhaseSynced || p == ClusterPhaseDryRun }

// Failing says whether the phase is a failure to act on (Failed, Conflict, Unsupported,
// NotEnforced, LockHeld): counted as failed in a status summary and as a sync error in the metrics; Pending is
// not yet either.
func (p ClusterPhase) Failing() bool { return p.ProblemRank() > ClusterPhasePending.ProblemRank() }

// ActionCounts counts what one sync did (or, in dry-run, would do) to the objects of a declaration.
type ActionCounts struct {
	// Created counts objects that did not exist in the cluster and were created.
	// +optional
	Created int32 `json:"created,omitempty"`
	// Updated counts owned objects whose content differed and were updated.
	// +optional
	Updated int32 `json:"updated,omitempty"`
	// Unchanged counts owned objects that already held the desired content (nothing was written).
	// +optional
	Unchanged int32 `json:"unchanged,omitempty"`
	// Deleted counts owned objects no longer wanted in the cluster that were pruned.
	// +optional
	Deleted int32 `json:"deleted,omitempty"`
	// Conflict counts objects of the same group, kind, namespace and name that policyhub does not
	// own; they were left untouched.
	// +optional
	Conflict int32 `json:"conflict,omitempty"`
	// Failed counts objects whose apply or delete failed (see the cluster's message).
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// ResultCounts counts policy report results, as Kyverno reports them.
type ResultCounts struct {
	// Pass counts results where the resource satisfied the rule.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Pass int64 `json:"pass,omitempty"`
	// Fail counts results where the resource violated the rule.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Fail int64 `json:"fail,omitempty"`
	// Warn counts results where the rule only warned (e.g. an Audit rule with audit annotations).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Warn int64 `json:"warn,omitempty"`
	// Error counts results where the rule could not be evaluated.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Error int64 `json:"error,omitempty"`
	// Skip counts results where the rule did not apply (preconditions unmet, exceptions).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Skip int64 `json:"skip,omitempty"`
}

// PlannedChange is one object's entry in a sync plan.
type PlannedChange struct {
	// Action planned for the object.
	// +kubebuilder:validation:Enum=Create;Update;Unchanged;Delete;Conflict;Failed
	Action string `json:"action"`
	// APIVersion of the object.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped kinds.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Diff is a unified diff of the live object against the desired one, cut to 4 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Diff string `json:"diff,omitempty"`
	// Message explains a Conflict or Failed action (e.g. the admission error).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ClusterStatus is the state of one declaration in one managed cluster. Every field means the
// same, and is written alike, whether one hub replica works the fleet or several share it.
type ClusterStatus struct {
	// Name of the managed cluster.
	Name string `json:"name"`
	// Phase of the last sync in this cluster.
	Phase ClusterPhase `json:"phase"`
	// Message says why the cluster is in this phase, in words a user can act on.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// InForce is set once the declaration's policies are synced in the cluster: true when Kyverno
	// there reports every one of them ready (its admission webhooks programmed: they are enforced
	// or audited), false while it has not confirmed one (just created, refused by Kyverno, or no
	// Kyverno running). Absent for dry-runs and clusters not synced.
	// +optional
	InForce *bool `json:"inForce,omitempty"`
	// LastSyncTime is when the last sync of this cluster finished.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Actions counts what the last sync did, or would do in dry-run.
	// +optional
	Actions ActionCounts `json:"actions,omitempty"`
	// Plan lists the changes of the last dry-run, with diffs; at most 20 entries.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Plan []PlannedChange `json:"plan,omitempty"`
	// PlanTruncated counts the plan entries left out of plan.
	// +optional
	PlanTruncated int32 `json:"planTruncated,omitempty"`
	// Results are the policy report results of this declaration's policies in this cluster,
	// from the cluster's latest PolicyReportSummary. Fail and error are always the latest; pass,
	// warn and skip (and reportTime) as of the slice's last write: they alone do not rewrite it.
	// +optional
	Results *ResultCounts `json:"results,omitempty"`
	// Blocked counts admissions this declaration's policies refused in this cluster, from the
	// agent's summary (policies[].blocked): server-side dry-runs not counted where the agent
	// could tell them apart (legacy kinds; see the summary's engine.kyverno.dryRunsCounted).
	// +optional
	Blocked int64 `json:"blocked,omitempty"`
	// BlockedIncludesDryRuns says blocked may count server-side dry-runs too: of a CEL policy
	// kind, or in a cluster whose agent could not read Kyverno's metrics.
	// +optional
	BlockedIncludesDryRuns bool `json:"blockedIncludesDryRuns,omitempty"`
	// LegacyObjects is the cluster's count of Kyverno legacy objects (owned or not), as its agent
	// last reported them, when the declaration's rollout gates a wave on them
	// (gate.maxLegacyObjects): the replica that works the cluster writes it, so the one that writes
	// the declaration's status judges the clusters other replicas work too. Absent otherwise.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LegacyObjects *int64 `json:"legacyObjects,omitempty"`
	// ReportTime is when the hub received the summary the results come from, by the hub's clock.
	// +optional
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	// Stale is true when the hub has heard nothing from the cluster's agent (neither its Lease
	// renewed nor a new summary) for three of its heartbeat intervals.
	// +optional
	Stale bool `json:"stale,omitempty"`
	// Revision is the version of the declaration the cluster last synced in full: a PolicySet's
	// source digest. Absent for kinds without versions and for clusters never synced.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Revision string `json:"revision,omitempty"`
	// ObservedGeneration is the declaration's generation this state answers: the replica that
	// works the cluster writes it, and the one that writes the declaration's status counts an
	// older one as Pending. Written with one replica as with many.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Problems are the objects the last sync could neither apply nor leave (failed or in
	// conflict), without diffs, at most 10: the replica that writes the declaration's status
	// counts them (a PolicySet's members that need attention) for the clusters other replicas
	// work.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Problems []PlannedChange `json:"problems,omitempty"`
	// ReportsFresh says whether the cluster's reports are of the version its rollout wave runs
	// (the gates count only such reports): the replica that works the cluster judges it, the one
	// that writes the declaration's status gates the wave on it. Absent for clusters not rolling.
	// +optional
	ReportsFresh *bool `json:"reportsFresh,omitempty"`
	// ReportsFreshFor is when the version whose reports were judged fresh arrived in the cluster,
	// by the hub's clock: a newer summary the hub has not observed yet (it records when within
	// moments) keeps that judgement instead of undoing it for those moments. Set only with
	// reportsFresh true.
	// +optional
	ReportsFreshFor *metav1.MicroTime `json:"reportsFreshFor,omitempty"`

	// Preview is the declaration's preview in this cluster (spec.preview), when one runs.
	// +optional
	Preview *ClusterPreview `json:"preview,omitempty"`

	// Violating are the PolicySet's members Kyverno reports fail or error results of in this
	// cluster, most first, at most 50: the replica that writes the set's status counts them for
	// the clusters other replicas work.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Violating []MemberViolations `json:"violating,omitempty"`
	// ApplicationResults are an ApplicationPolicy's results per generated policy in this cluster,
	// at most 100, and Violations its top violations here, at most 20: the replica that writes
	// the status merges them for the clusters other replicas work.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	ApplicationResults []ApplicationPolicyResult `json:"applicationResults,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Violations []Violation `json:"violations,omitempty"`
}

// MemberViolations counts the fail and error results of one PolicySet member in one cluster.
type MemberViolations struct {
	MemberRef `json:",inline"`
	// Violations are the member's fail and error results in the cluster.
	// +kubebuilder:validation:Minimum=0
	Violations int64 `json:"violations"`
}

// WithoutChurn is the result counts without those that move with every agent's summary (pass,
// warn, skip): a change of those alone does not make the hub write a declaration's status or
// slices; they are taken along when anything else changes.
func (r ResultCounts) WithoutChurn() ResultCounts { return ResultCounts{Fail: r.Fail, Error: r.Error} }

// WithoutChurn is the cluster's state without what moves with every agent's summary: the pass,
// warn and skip counts and the report time (see ResultCounts.WithoutChurn).
func (c ClusterStatus) WithoutChurn() ClusterStatus {
	if c.Results != nil {
		r := c.Results.WithoutChurn()
		c.Results = &r
	}
	c.ReportTime = nil
	if len(c.ApplicationResults) > 0 {
		results := make([]ApplicationPolicyResult, len(c.ApplicationResults))
		for i, r := range c.ApplicationResults {
			r.Results = r.Results.WithoutChurn()
			results[i] = r
		}
		c.ApplicationResults = results
	}
	return c
}

// StatusSummary totals a declaration's state across its clusters, bounded at any fleet size: the
// state in each cluster is in the declaration's ClusterStatusSlices.
type StatusSummary struct {
	// Clusters selected by the placement (and clusters still being pruned).
	// +optional
	Clusters int32 `json:"clusters,omitempty"`
	// Synced clusters (phase Synced or DryRun).
	// +optional
	Synced int32 `json:"synced,omitempty"`
	// Failed clusters (phase Failed, Conflict, Unsupported, NotEnforced or LockHeld).
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// NotEnforced clusters: they hold the declaration but their engine does not enforce it (e.g.
	// Kyverno 1.20 and a legacy kind); counted in failed too, and never as protected.
	// +optional
	NotEnforced int32 `json:"notEnforced,omitempty"`
	// Pending clusters: selected, no result yet.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// Stale clusters: their agent has not been heard for three heartbeats.
	// +optional
	Stale int32 `json:"stale,omitempty"`
	// Results totals report results across clusters. The status is not written for a change of
	// the pass, warn or skip counts alone: they are as of the last write, taken along when
	// violations or anything else changes (the hub's metrics have them live).
	// +optional
	Results ResultCounts `json:"results,omitempty"`
	// Violations is results.fail + results.error across clusters, for printer columns and dashboards.
	// +optional
	Violations int64 `json:"violations,omitempty"`
	// Attention names the clusters that need it most — not synced (worst phase first) or with a
	// silent agent — at most 20; attentionOmitted counts the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Attention []ClusterAttention `json:"attention,omitempty"`
	// AttentionOmitted counts the clusters needing attention that attention leaves out.
	// +optional
	AttentionOmitted int32 `json:"attentionOmitted,omitempty"`
}

// ClusterAttention is a cluster that needs attention: its phase and why.
type ClusterAttention struct {
	// Name of the cluster.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Phase of the declaration in the cluster.
	Phase ClusterPhase `json:"phase"`
	// Message says why, cut to 256 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
	// Stale is true when the cluster's agent has not been heard for three heartbeats.
	// +optional
	Stale bool `json:"stale,omitempty"`
}

// Violation is one failing (or erroring) result, kept for users to act on.
type Violation struct {
	// Cluster the result comes from (empty inside a PolicyReportSummary, whose cluster is spec.cluster).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`
	// Policy that produced the result: name, or namespace/name for a namespaced policy.
	// +kubebuilder:validation:MaxLength=317
	Policy string `json:"policy"`
	// Rule of the policy.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Rule string `json:"rule,omitempty"`
	// Result: fail or error.
	// +kubebuilder:validation:Enum=fail;error
	Result string `json:"result"`
	// Severity from the policy's policies.kyverno.io/severity annotation.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Severity string `json:"severity,omitempty"`
	// Resource the result is about.
	Resource ResourceRef `json:"resource"`
	// Message of the result, cut to 512 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// Timestamp of the result.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	Timestamp *metav1.Time `json:"timestamp,omitempty"`
}

// ResourceRef names one Kubernetes resource.
type ResourceRef struct {
	// APIVersion of the resource.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the resource.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of the resource; empty for cluster-scoped kinds.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PolicyCapability is something a Kyverno policy does beyond validating, which a declaration
// must allow (spec.allow) before it ships a policy that does it: these change or remove the
// clusters' objects, or let Kyverno rewrite them, where a validating policy only judges.
// +kubebuilder:validation:Enum=Mutate;Generate;Cleanup;VerifyImages
type PolicyCapability string

// The capabilities a declaration may allow.
const (
	// CapabilityMutate: mutate rules, MutatingPolicy and NamespacedMutatingPolicy.
	CapabilityMutate PolicyCapability = "Mutate"
	// CapabilityGenerate: generate rules, GeneratingPolicy and NamespacedGeneratingPolicy.
	CapabilityGenerate PolicyCapability = "Generate"
	// CapabilityCleanup: (Cluster)CleanupPolicy, DeletingPolicy and NamespacedDeletingPolicy,
	// which delete the clusters' objects.
	CapabilityCleanup PolicyCapability = "Cleanup"
	// CapabilityVerifyImages: verifyImages rules, ImageValidatingPolicy and
	// NamespacedImageValidatingPolicy, which rewrite image references to digests by default.
	CapabilityVerifyImages PolicyCapability = "VerifyImages"
)
