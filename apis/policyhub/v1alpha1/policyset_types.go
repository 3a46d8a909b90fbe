package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindPolicySet is the PolicySet's Kind, as a ClusterStatusSlice and a rendered object's source
// name it.
const KindPolicySet = "PolicySet"

// A PolicySet's own condition on its source, and its Ready reason while the source cannot be read.
const (
	// ConditionSourceReady is False while the set's source cannot be read (unreachable, refused,
	// or holding something that is not a valid library): the clusters keep the last version read.
	ConditionSourceReady = "SourceReady"
	// ReasonSourceNotReady is the Ready reason while the source cannot be read: nothing was
	// dispatched (no version was ever read), or the clusters keep the last version read. As Flux's
	// source-controller does for a source whose fetch fails (Ready False, its last artifact kept),
	// the set is not Ready: what its source holds now is not known to be in the clusters.
	ReasonSourceNotReady = "SourceNotReady"
)

// Bounds of a PolicySet's status: it stays small at any library and fleet size.
const (
	// MaxAttentionMembers is how many members status.attentionMembers names.
	MaxAttentionMembers = 20
	// MaxChangedMembers is how many members each list of status.changes names.
	MaxChangedMembers = 20
)

// Labels of a PolicySet's snapshots: hub ConfigMaps in the hub's namespace, one per source
// revision, holding the set's members as read (gzip JSON under SnapshotKey), so that the hub
// renders without reading the source again and keeps the last good version when it cannot.
const (
	// LabelPolicySet, on a snapshot, is the name of the PolicySet it belongs to.
	LabelPolicySet = "policyhub.io/policyset"
	// LabelPolicyLibrary, on a ConfigMap in the hub's namespace, offers the policies in it to the
	// PolicySets whose spec.source.configMaps selects it by its labels.
	LabelPolicyLibrary = "policyhub.io/policy-library"
	// SnapshotKey is the binaryData key of a snapshot: the members, gzip-compressed JSON.
	SnapshotKey = "members.json.gz"
)

// PolicySetSpec declares a library of Kyverno policies and the clusters it must run in: every
// member goes to every selected cluster, as one FleetPolicy would take one policy there.
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || !has(self.placement.placementRef) || (has(self.placement.placementRef.namespace) && size(self.placement.placementRef.namespace) > 0)",message="placement.placementRef.namespace is required on a PolicySet, which is cluster-scoped"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.mode)",message="spec.mode cannot be set with spec.rollout: the rollout runs each wave in Audit, then Enforce"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.clusterOverrides) || self.clusterOverrides.all(o, !has(o.mode))",message="spec.clusterOverrides[].mode cannot be set with spec.rollout: the rollout decides each cluster's mode"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.previewGate)",message="spec.rollout.previewGate is not supported on a PolicySet yet: preview a member as a FleetPolicy (spec.preview)"
type PolicySetSpec struct {
	// Source is where the policies come from: an OCI artifact, a Flux source, labelled
	// ConfigMaps on the hub, or the policies listed here.
	Source PolicySetSource `json:"source"`

	// Select narrows the source's policies to the set's members; empty takes every one.
	// +optional
	Select *MemberSelector `json:"select,omitempty"`

	// Delivery is where and how the members go to the fleet.
	Delivery `json:",inline"`

	// Allow lets the set's members do more than validate: Mutate, Generate, Cleanup,
	// VerifyImages. Whoever can write the source (a Git repository, a registry) is a library
	// writer: by default they ship validating policies only, and a version holding a member
	// that mutates, generates, deletes or verifies images without being allowed here is refused
	// (SourceReady False, naming the member), the clusters keeping the last good version.
	// Exceptions never arrive through a library: they are FleetPolicyExceptions.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Allow []PolicyCapability `json:"allow,omitempty"`
}

// PolicySetSource is where a PolicySet's policies come from: exactly one of oci, fluxSource,
// configMaps, inline.
// +kubebuilder:validation:XValidation:rule="[has(self.oci), has(self.fluxSource), has(self.configMaps), has(self.inline)].filter(x, x).size() == 1",message="spec.source needs exactly one of oci, fluxSource, configMaps, inline"
type PolicySetSource struct {
	// OCI is an artifact as `kyverno oci push` writes it: one layer per ClusterPolicy or Policy.
	// +optional
	OCI *OCISource `json:"oci,omitempty"`

	// FluxSource takes every Kyverno policy under a path of a Flux source's artifact (a Git
	// repository's files, for one): the hub reads the source's status.artifact, downloads it from
	// Flux's source-controller and verifies its digest, as Flux's own controllers do.
	// +optional
	FluxSource *FluxSourceReference `json:"fluxSource,omitempty"`

	// ConfigMaps takes every Kyverno policy in the ConfigMaps of the hub's namespace that carry
	// the label policyhub.io/policy-library and match the selector: each key ending in .yaml or
	// .yml holds one or more YAML documents.
	// +optional
	ConfigMaps *ConfigMapSource `json:"configMaps,omitempty"`

	// Inline lists the policies in the PolicySet itself.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	Inline []PolicyTemplate `json:"inline,omitempty"`
}

// OCISource is an OCI artifact of Kyverno policies.
type OCISource struct {
	// Ref is the artifact's reference: registry/repository:tag, or @sha256:digest to pin it. A
	// tag is read again every interval and a new digest is a new version of the set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('://')",message="spec.source.oci.ref is an OCI reference (registry/repository:tag or @sha256:digest), not a URL: leave out the scheme"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') || self.matches('@sha256:[a-f0-9]{64}$')",message="spec.source.oci.ref: a digest must be @sha256: and 64 lowercase hex digits"
	Ref string `json:"ref"`

	// SecretRef names a docker-registry Secret (kubernetes.io/dockerconfigjson) in the hub's
	// namespace with the registry's credentials; anonymous without it.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// Interval is how often a tag is read again; a digest never is. Default 5m, at least 30s.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="spec.source.oci.interval must be at least 30s"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Insecure reads the registry over plain HTTP (a registry on a private network only).
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// FluxSourceReference names a Flux source on the hub, and the folder of its artifact to read.
type FluxSourceReference struct {
	// Kind of the source (source.toolkit.fluxcd.io/v1).
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
	Kind string `json:"kind"`
	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the source: one the hub admin allows (policyhub-hub's
	// --flux-source-namespaces: flux-system and the hub's own by default), since whoever may
	// edit the source decides what the set ships. Another is refused (SourceReady False) and
	// nothing is read there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Path is the folder of the artifact whose policies the set takes, with its subfolders (e.g.
	// clusters/staging); empty takes the whole artifact. Every YAML document there that is a
	// Kyverno policy is a member; other documents are skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..')",message="spec.source.fluxSource.path is a folder inside the artifact: relative, without '..'"
	Path string `json:"path,omitempty"`
}

// LocalSecretReference names a Secret in the hub's namespace.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ConfigMapSource selects the ConfigMaps of a PolicySet among the hub's policy libraries.
type ConfigMapSource struct {
	// Selector selects ConfigMaps by their labels, among those labelled
	// policyhub.io/policy-library in the hub's namespace. Empty selects all of them.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// MemberSelector narrows a source's policies to a set's members: a policy is a member when it
// matches every include list given and no exclude list.
type MemberSelector struct {
	// IncludeKinds keeps only policies of these kinds (e.g. ClusterPolicy).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=63
	IncludeKinds []string `json:"includeKinds,omitempty"`

	// ExcludeKinds leaves out policies of these kinds.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=63
	ExcludeKinds []string `json:"excludeKinds,omitempty"`

	// IncludeNames keeps only policies of these names.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=253
	IncludeNames []string `json:"includeNames,omitempty"`

	// ExcludeNames leaves out policies of these names.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=253
	ExcludeNames []string `json:"excludeNames,omitempty"`

	// LabelSelector keeps only policies whose own labels match.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// PolicySetStatus is the observed state of a PolicySet: its source, its members and its clusters.
type PolicySetStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled (kstatus-compatible), and SourceReady: False while
	// the source cannot be read, the clusters keeping the last version read (Ready is then False
	// too, reason SourceNotReady, as Flux's sources are while a fetch fails).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Source is the version of the source the set runs.
	// +optional
	Source *SourceStatus `json:"source,omitempty"`

	// Members counts the set's members and those failing or violated somewhere.
	// +optional
	Members MemberCounts `json:"members,omitempty"`

	// Changes are the members the last new version added, changed and removed.
	// +optional
	Changes *VersionChanges `json:"changes,omitempty"`

	// AttentionMembers names the members that need attention, worst first: those that failed or
	// conflict in some cluster, with the clusters' message (Kyverno's, when Kyverno refused it),
	// then those with the most violations. At most 20.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	AttentionMembers []MemberAttention `json:"attentionMembers,omitempty"`

	// Summary totals the clusters' state and names those that need attention; the state in each
	// cluster (and the revision it runs) is in the set's ClusterStatusSlices.
	// +optional
	Summary StatusSummary `json:"summary,omitempty"`

	// Rollout is the progressive rollout's state, when spec.rollout is set: its revision is the
	// first 12 hex digits of the source digest.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// SourceStatus is a version of a PolicySet's source, as read.
type SourceStatus struct {
	// Revision names the version: the OCI reference asked for, the Flux artifact's revision
	// (e.g. main@sha1:…), "inline", or "configmaps".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Revision string `json:"revision,omitempty"`
	// Digest pins the version: the OCI manifest's digest, or the sha256 of the members read
	// (a Flux source's commit that changes nothing under the path is no new version).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Digest string `json:"digest,omitempty"`
	// Snapshot is the hub ConfigMap (in the hub's namespace) holding the version's members.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Snapshot string `json:"snapshot,omitempty"`
	// MembersDigest is the sha256 of the members' JSON as the snapshot holds them (for Flux,
	// ConfigMaps and inline sources the digest itself): the hub hashes the snapshot again on every
	// read and refuses one that does not match.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	MembersDigest string `json:"membersDigest,omitempty"`
	// ReadAt is when this version was first read.
	// +optional
	ReadAt *metav1.Time `json:"readAt,omitempty"`
	// Members counts the policies the source holds.
	// +optional
	Members int32 `json:"members,omitempty"`
	// Skipped counts the documents the source holds that are not Kyverno policies.
	// +optional
	Skipped int32 `json:"skipped,omitempty"`
	// Capabilities are what the version's members do beyond validating, as spec.allow lets
	// them: empty when every member only validates.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Capabilities []PolicyCapability `json:"capabilities,omitempty"`
	// LastError says why the source could not be read last time, "" when it could.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`
}

// MemberCounts counts a set's members.
type MemberCounts struct {
	// Total members after spec.select.
	// +optional
	Total int32 `json:"total,omitempty"`
	// Failed members: failed in at least one cluster.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Conflict members: another owner holds the same object in at least one cluster.
	// +optional
	Conflict int32 `json:"conflict,omitempty"`
	// Violating members: with fail or error results in at least one cluster.
	// +optional
	Violating int32 `json:"violating,omitempty"`
	// ByEngine counts the members by the engine that enforces them (Kyverno, Kubernetes,
	// Gatekeeper): a set may hold members of several.
	// +optional
	// +listType=map
	// +listMapKey=engine
	// +kubebuilder:validation:MaxItems=3
	ByEngine []EngineCount `json:"byEngine,omitempty"`
}

// MemberRef names a member: kind, namespace (namespaced kinds) and name.
type MemberRef struct {
	// Kind of the member, e.g. ClusterPolicy.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of a namespaced member.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the member.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VersionChanges are the members a new version of the source added, changed and removed, at
// most 20 each; omitted counts those left out.
type VersionChanges struct {
	// From is the digest of the version before ("" for the first version read).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	From string `json:"from,omitempty"`
	// To is the digest of the new version.
	// +kubebuilder:validation:MaxLength=128
	To string `json:"to"`
	// Added members: in the new version only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Added []MemberRef `json:"added,omitempty"`
	// Changed members: in both, with different content.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Changed []MemberRef `json:"changed,omitempty"`
	// Removed members: in the version before only; pruned from the clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Removed []MemberRef `json:"removed,omitempty"`
	// Omitted counts the members left out of the three lists.
	// +optional
	Omitted int32 `json:"omitted,omitempty"`
}

// MemberAttention is a member that needs attention in some clusters: it failed to sync there, is
// in conflict there, or (Violating) Kyverno reports fail or error results of it there.
type MemberAttention struct {
	MemberRef `json:",inline"`
	// Action is Failed, Conflict or Violating.
	// +kubebuilder:validation:Enum=Failed;Conflict;Violating
	Action string `json:"action"`
	// Clusters counts the clusters where it is so.
	Clusters int32 `json:"clusters"`
	// Cluster is one of them: whose message this is, or with the most violations.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// Message says why, as the cluster answered (Kyverno's own message when it refused the member).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// Violations totals the member's fail and error results across its clusters (Violating).
	// +optional
	Violations int64 `json:"violations,omitempty"`
}

// PolicySet runs a library of Kyverno policies — from an OCI artifact, a Flux source (a Git
// repository), ConfigMaps on the hub, or listed inline — in every cluster its placement selects,
// as one declaration.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pset,categories=policyhub
// +kubebuilder:printcolumn:name="Members",type=integer,JSONPath=`.status.members.total`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.source.revision`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.conditions[?(@.type=="SourceReady")].reason`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.summary.clusters`
// +kubebuilder:printcolumn:name="Synced",type=integer,JSONPath=`.status.summary.synced`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.summary.violations`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Digest",type=string,priority=1,JSONPath=`.status.source.digest`
// +kubebuilder:printcolumn:name="Does",type=string,priority=1,JSONPath=`.status.source.capabilities`
// +kubebuilder:printcolumn:name="Status",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Source-Status",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="SourceReady")].message`
type PolicySet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the library and where it runs.
	Spec PolicySetSpec `json:"spec"`

	// Status is the library's version and state in the clusters.
	// +optional
	Status PolicySetStatus `json:"status,omitempty"`
}

// PolicySetList is a list of PolicySet.
// +kubebuilder:object:root=true
type PolicySetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicySet `json:"items"`
}

// DeclarationStatus points at what the status of every declaration kind holds.
func (ps *PolicySet) DeclarationStatus() DeclarationStatus {
	return DeclarationStatus{ObservedGeneration: &ps.Status.ObservedGeneration, Conditions: &ps.Status.Conditions, Summary: &ps.Status.Summary}
}

func init() {
	SchemeBuilder.Register(&PolicySet{}, &PolicySetList{})
}
