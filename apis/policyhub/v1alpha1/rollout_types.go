package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationRolloutApproved holds a FleetPolicy's manual rollout approvals: comma-separated
// "wave@revision" entries, each approving one wave for one revision of the template (so an
// approval never carries over to a later version). `kubectl policyhub rollout approve` writes it.
const AnnotationRolloutApproved = "policyhub.io/rollout-approved"

// MaxRolloutWaves bounds a rollout's waves, and so its status.
const MaxRolloutWaves = 20

// Rollout rolls a FleetPolicy out wave by wave: each wave first runs the policy in Audit, and
// is promoted to Enforce only when its gate holds on fresh agent reports of the current
// template in the wave's clusters; then the next wave starts. A placed cluster in no wave gets
// nothing. A new template version rolls out the same way, from the first wave; until their
// wave is reached, clusters keep the last version that completed the rollout.
// +kubebuilder:validation:XValidation:rule="self.waves.all(w, self.waves.exists_one(v, v.name == w.name))",message="rollout.waves[].name must be unique"
// +kubebuilder:validation:XValidation:rule="self.waves.all(w, w == self.waves[size(self.waves)-1] || (has(w.clusters) && size(w.clusters) > 0) || has(w.clusterSelector))",message="only the last rollout wave may select no clusters (it then takes every placed cluster no earlier wave took): give the others clusters or clusterSelector"
type Rollout struct {
	// Waves in order. A cluster belongs to the first wave that selects it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Waves []RolloutWave `json:"waves"`

	// Paused holds every wave where it is.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// PreviewGate, when set, previews every new version before its first wave: a report-only
	// shadow of it in every placed cluster (beside what each runs), and wave 1 starts only once
	// every placed cluster has reported the shadow's results and they are within the gate.
	// A version over the gate never ships; a new version, or a wider gate, is previewed again.
	// FleetPolicy only.
	// +optional
	PreviewGate *PreviewGate `json:"previewGate,omitempty"`
}

// PreviewGate is what a new version's preview must show before its waves start.
// +kubebuilder:validation:XValidation:rule="has(self.maxWouldFail) || has(self.maxNewlyFailing) || has(self.parity)",message="rollout.previewGate needs maxWouldFail, maxNewlyFailing or parity"
type PreviewGate struct {
	// MaxWouldFail bounds the resources the new version would fail, summed over every placed
	// cluster, before the first wave starts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxWouldFail *int64 `json:"maxWouldFail,omitempty"`

	// MaxNewlyFailing bounds those of them the running version does not fail.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxNewlyFailing *int64 `json:"maxNewlyFailing,omitempty"`

	// Parity, when set, swaps the running version for the new one (e.g. a legacy ClusterPolicy
	// for its CEL conversion) wave by wave, each wave once its clusters show the two judge
	// every resource alike: the shadow keeps running in the waves not reached, a wave starts
	// only when its clusters have reported and differ in at most maxDiffering resources, and
	// it goes straight to Enforce with the running version kept until the new one is in force
	// (a cluster never enforces neither). The swapped objects must differ in kind or name.
	// +optional
	Parity *ParityGate `json:"parity,omitempty"`
}

// ParityGate is how alike the new version and the running one must judge a wave's resources
// before the wave swaps them.
type ParityGate struct {
	// MaxDiffering bounds the resources of the wave's clusters the two versions judge
	// differently, or only one of them judges: 0 (the default) is full parity; more accepts
	// differences the user reviewed (kubectl policyhub preview names them).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxDiffering int64 `json:"maxDiffering,omitempty"`
}

// RolloutWave is a set of placed clusters promoted together.
type RolloutWave struct {
	// Name of the wave, e.g. staging.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Clusters of the wave, by name (only those the placement selects).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	Clusters []string `json:"clusters,omitempty"`

	// ClusterSelector selects the wave's clusters, among those the placement selects, by label.
	// It must require a label (a matchLabels entry, or a matchExpressions entry with operator In
	// or Exists): NotIn and DoesNotExist alone would take every placed cluster without the label
	// into this wave. Neither clusters nor clusterSelector (last wave only) takes every placed
	// cluster left.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="rollout.waves[].clusterSelector is empty and would take every placed cluster left into this wave; give matchLabels or matchExpressions, or leave clusterSelector out of the last wave to take every placed cluster left"
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || !has(self.matchExpressions) || size(self.matchExpressions) == 0 || self.matchExpressions.exists(e, e.operator == 'In' || e.operator == 'Exists')",message="rollout.waves[].clusterSelector has only NotIn or DoesNotExist requirements and would take every placed cluster without those labels into this wave: add a matchLabels entry or a matchExpressions entry with operator In or Exists, or leave clusterSelector out of the last wave to take every placed cluster left"
	ClusterSelector *ClusterSelector `json:"clusterSelector,omitempty"`

	// Gate is what the wave must show in Audit before it is promoted to Enforce.
	// +optional
	Gate RolloutGate `json:"gate,omitempty"`
}

// RolloutGate is measured from the agents' summaries of the wave's clusters, for this policy
// only, on reports generated after the clusters received the current version.
type RolloutGate struct {
	// MaxFail is the most fail results (existing resources and admissions Kyverno recorded in
	// Audit) summed over the wave's clusters. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxFail int64 `json:"maxFail,omitempty"`

	// MaxBlocked is the most admissions the policy refused, summed over the wave's clusters, as
	// Kyverno's Events record them (about the last hour), server-side dry-runs (kubectl apply
	// --dry-run=server) not counted: the agent takes them out using Kyverno's metrics, for the
	// legacy kinds ClusterPolicy and Policy. A CEL kind's dry-runs, and every dry-run in a
	// cluster whose agent could not read Kyverno's metrics, are counted (the wave's reason names
	// those clusters). Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxBlocked int64 `json:"maxBlocked,omitempty"`

	// Soak is how long the gate must hold without a break before the wave is promoted.
	// +optional
	Soak *metav1.Duration `json:"soak,omitempty"`

	// MaxLegacyObjects, when set, holds the wave until each of its clusters reports at most this
	// many Kyverno legacy objects (owned by policyhub or not; see PolicyReportSummary
	// spec.engine.legacy): 0 gates a Kyverno 1.20 upgrade on clusters with none left. A cluster
	// whose agent has not reported its inventory holds the wave.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxLegacyObjects *int64 `json:"maxLegacyObjects,omitempty"`

	// Approval asks a person to approve the wave as well (annotation
	// policyhub.io/rollout-approved, or `kubectl policyhub rollout approve NAME WAVE`).
	// +optional
	Approval bool `json:"approval,omitempty"`
}

// WavePhase is where a wave is in the rollout of the current version.
// +kubebuilder:validation:Enum=Pending;Auditing;Waiting;Enforcing;Done
type WavePhase string

const (
	// WavePending: not reached yet; its clusters keep the last completed version, or get nothing.
	WavePending WavePhase = "Pending"
	// WaveAuditing: the current version runs in Audit; waiting for its clusters' fresh reports.
	WaveAuditing WavePhase = "Auditing"
	// WaveWaiting: reports are in; waiting for the gate, the soak or an approval.
	WaveWaiting WavePhase = "Waiting"
	// WaveEnforcing: promoted; Enforce is being synced.
	WaveEnforcing WavePhase = "Enforcing"
	// WaveDone: in force in Enforce in every cluster of the wave.
	WaveDone WavePhase = "Done"
)

// RolloutStatus is the rollout of the current template version.
type RolloutStatus struct {
	// Revision names the template version being rolled out (a hash of spec.template).
	// +optional
	Revision string `json:"revision,omitempty"`

	// CurrentWave is the first wave not Done ("" once every wave is).
	// +optional
	CurrentWave string `json:"currentWave,omitempty"`

	// Waves, in the spec's order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Waves []WaveStatus `json:"waves,omitempty"`

	// Stable is the last version that completed every wave: the clusters of waves the current
	// version has not reached keep it.
	// +optional
	Stable *StableVersion `json:"stable,omitempty"`
}

// StableVersion is a version that completed the rollout: a FleetPolicy's template, or a
// PolicySet's snapshot of members.
type StableVersion struct {
	// Revision names the version (a hash of a FleetPolicy's template; the first 12 hex digits of
	// a PolicySet's source digest).
	Revision string `json:"revision"`
	// Template is a FleetPolicy version's spec.template.
	// +optional
	Template *PolicyTemplate `json:"template,omitempty"`
	// Snapshot is the hub ConfigMap (in the hub's namespace) holding a PolicySet version's members.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Snapshot string `json:"snapshot,omitempty"`
	// MembersDigest is the sha256 of a PolicySet version's members as its snapshot holds them:
	// the snapshot is hashed again on every read and refused when it does not match.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	MembersDigest string `json:"membersDigest,omitempty"`
}

// WaveStatus is one wave's state in the rollout of the current version.
type WaveStatus struct {
	// Name of the wave.
	Name string `json:"name"`
	// Phase is where the wave is: Pending, Auditing, Waiting, Enforcing or Done.
	Phase WavePhase `json:"phase"`
	// Since is when the wave entered its phase.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Clusters is how many placed clusters the wave has.
	// +optional
	Clusters int32 `json:"clusters,omitempty"`
	// SyncedAt is when every cluster of the wave first held the current version in Audit;
	// only reports generated after it count.
	// +optional
	SyncedAt *metav1.Time `json:"syncedAt,omitempty"`
	// HoldingSince is when the gate started to hold without a break.
	// +optional
	HoldingSince *metav1.Time `json:"holdingSince,omitempty"`
	// Fail is the last measured sum of fail results over the wave's clusters.
	// +optional
	Fail int64 `json:"fail,omitempty"`
	// Blocked is the last measured sum of refused admissions over the wave's clusters, what
	// gate.maxBlocked bounds: server-side dry-runs not counted where the agents could tell
	// them apart (see maxBlocked).
	// +optional
	Blocked int64 `json:"blocked,omitempty"`
	// LegacyObjects is the last measured sum of Kyverno legacy objects over the wave's clusters
	// (set when the gate has maxLegacyObjects).
	// +optional
	LegacyObjects *int64 `json:"legacyObjects,omitempty"`
	// Reason says why the wave waits, with the measured values.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// GatesOnLegacyObjects says whether a wave of the rollout holds on its clusters' Kyverno legacy
// objects (gate.maxLegacyObjects).
func (r *Rollout) GatesOnLegacyObjects() bool {
	if r == nil {
		return false
	}
	for _, w := range r.Waves {
		if w.Gate.MaxLegacyObjects != nil {
			return true
		}
	}
	return false
}
