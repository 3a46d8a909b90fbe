package v1alpha1

// Delivery is how a cluster-scoped declaration (FleetPolicy, PolicySet) goes to the fleet: where
// (placement), how (mode, dry-run, per-cluster overrides), whether (suspend), what it leaves behind
// (prune) and in which order (rollout). Both kinds inline it in their spec, so the fields are the
// spec's own on the wire.
type Delivery struct {
	// Placement selects the clusters. Empty selects none.
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// Mode overrides the failure action of the declaration's validating policies: Enforce
	// refuses violating resources, Audit only reports them. Rewrites each rule's
	// validate.failureAction and verifyImages failureAction (kyverno.io kinds) or the
	// validationActions (policies.kyverno.io kinds). Audit also removes every per-namespace
	// override that is not Audit (failureActionOverrides, validationFailureActionOverrides), so
	// it enforces nowhere; Enforce keeps the policies' Audit overrides, the exemptions their
	// authors chose. A PolicySet's members that validate nothing (mutating, generating,
	// exceptions) keep theirs. Unset keeps each policy's own.
	// +optional
	Mode *Mode `json:"mode,omitempty"`

	// DryRun plans and dry-run applies everywhere (admission runs, nothing persists) and reports
	// the plan with diffs in status.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// ClusterOverrides change mode, dry-run or inclusion for some of the selected clusters.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	ClusterOverrides []ClusterOverride `json:"clusterOverrides,omitempty"`

	// Suspend stops syncing (and a PolicySet's reading of its source); what the clusters hold
	// stays as it is.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Prune deletes the declaration's policies from clusters that are no longer selected (and a
	// PolicySet's members its source no longer holds), and from every cluster when the
	// declaration is deleted. Only objects policyhub owns are ever deleted.
	// +optional
	// +kubebuilder:default=true
	Prune *bool `json:"prune,omitempty"`

	// Rollout rolls the declaration out in waves of clusters, each in Audit first and promoted to
	// Enforce when what Kyverno measured there passes the wave's gate; a PolicySet rolls each
	// version out as one unit, and the clusters of waves not reached keep the last version that
	// completed the rollout. It decides the mode: spec.mode and clusterOverrides[].mode cannot be
	// set with it.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}
