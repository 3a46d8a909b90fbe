package v1alpha1

import (
	"slices"
	"strings"
)

// A fleet runs more than one policy engine: Kyverno, Kubernetes' own admission policies
// (ValidatingAdmissionPolicy, evaluated by the API server) and Gatekeeper. Agent, hub, CLI and
// web view name them with these values, told apart by the API group of the policy's kind (a
// Gatekeeper Constraint's kind is whatever its template says, so the kind alone cannot tell).

// PolicyEngine names the engine that enforces and reports a policy.
// +kubebuilder:validation:Enum=Kyverno;Kubernetes;Gatekeeper
type PolicyEngine string

const (
	// EngineKyverno: kyverno.io and policies.kyverno.io kinds, enforced by Kyverno's webhooks,
	// reported in its PolicyReports.
	EngineKyverno PolicyEngine = "Kyverno"
	// EngineKubernetes: admissionregistration.k8s.io ValidatingAdmissionPolicy, enforced by the
	// API server itself; the agent evaluates existing resources in the background.
	EngineKubernetes PolicyEngine = "Kubernetes"
	// EngineGatekeeper: templates.gatekeeper.sh ConstraintTemplates and constraints.gatekeeper.sh
	// Constraints, enforced by Gatekeeper's webhook, reported by its audit in the Constraints' status.
	EngineGatekeeper PolicyEngine = "Gatekeeper"
)

// PolicyEngines are every engine, in the order views list them.
func PolicyEngines() []PolicyEngine {
	return []PolicyEngine{EngineKyverno, EngineKubernetes, EngineGatekeeper}
}

// API groups of Gatekeeper's kinds.
const (
	GatekeeperTemplateGroup   = "templates.gatekeeper.sh"
	GatekeeperConstraintGroup = "constraints.gatekeeper.sh"
)

// EngineOfGroup is the engine of a policy kind's API group; false when no engine the hub ships
// to owns the group.
func EngineOfGroup(group string) (PolicyEngine, bool) {
	switch group {
	case "kyverno.io", "policies.kyverno.io", "wgpolicyk8s.io", "reports.kyverno.io":
		return EngineKyverno, true
	case AdmissionGroup:
		return EngineKubernetes, true
	case GatekeeperTemplateGroup, GatekeeperConstraintGroup:
		return EngineGatekeeper, true
	}
	return "", false
}

// EngineOfAPIVersion is the engine of a policy object of apiVersion (group/version); false when
// no engine the hub ships to owns its group (a core "v1" object has none).
func EngineOfAPIVersion(apiVersion string) (PolicyEngine, bool) {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return "", false
	}
	return EngineOfGroup(group)
}

// MaxEngineCounts bounds a list of counts by engine: one per engine.
const MaxEngineCounts = 3

// EngineCount is how many of something (a set's members) one engine enforces.
type EngineCount struct {
	// Engine enforcing them.
	Engine PolicyEngine `json:"engine"`
	// Count of them.
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// EngineOrKyverno is a summary entry's engine: an agent older than the field names none, and
// then it reported Kyverno's results only.
func EngineOrKyverno(e PolicyEngine) PolicyEngine {
	if e == "" {
		return EngineKyverno
	}
	return e
}

// GatekeeperFacts is what a cluster's Gatekeeper says of itself, read by the agent.
type GatekeeperFacts struct {
	// Version of Gatekeeper, e.g. v3.23.1; empty when it could not be told.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^(v?[0-9]+\.[0-9]+(\.[0-9]+)?([-+][0-9A-Za-z.+-]*)?)?$`
	Version string `json:"version,omitempty"`
	// VersionSource says where version was read.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	VersionSource string `json:"versionSource,omitempty"`
	// Webhook is true when Gatekeeper's validating webhook is registered: without it constraints
	// are audited, never enforced at admission.
	// +optional
	Webhook bool `json:"webhook,omitempty"`
}

// AdmissionPolicyFacts is what the cluster's API server offers of its own admission policies.
type AdmissionPolicyFacts struct {
	// Evaluated is true when the agent evaluates the cluster's existing resources against its
	// ValidatingAdmissionPolicies in the background (the API server keeps no such results).
	// +optional
	Evaluated bool `json:"evaluated,omitempty"`
	// RefusalsCounted says whether the agent could count the admissions the API server refused
	// by policy (from its apiserver_validating_admission_policy_check_total); absent when not
	// looked at; false with refusalsNotCounted saying why.
	// +optional
	RefusalsCounted *bool `json:"refusalsCounted,omitempty"`
	// RefusalsNotCounted says why refusals could not be counted, e.g. /metrics forbidden.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	RefusalsNotCounted string `json:"refusalsNotCounted,omitempty"`
	// NotEvaluated says what the background evaluation left out, when it left something out:
	// policies it does not evaluate (with paramKind, or beyond its bound), resource types it
	// could not list or did not reach, objects beyond its bounds, an evaluation stopped at its
	// time limit. Results of what was evaluated are reported; empty when nothing was left out.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	NotEvaluated string `json:"notEvaluated,omitempty"`
}

// ReportsResult says whether the engine's results of kind result (pass, fail, warn, error,
// skip) are known in a cluster of engine facts info; a kind not known is unknown, never 0.
// Kyverno writes the kinds its --allowedResults lets it (info.ReportsResult); the agent's own
// background evaluation of Kubernetes admission policies counts every kind; Gatekeeper's audit
// counts violations only (a Constraint's status.totalViolations), so only fail is known.
func (e PolicyEngine) ReportsResult(info *EngineInfo, result string) bool {
	switch EngineOrKyverno(e) {
	case EngineKubernetes:
		return true
	case EngineGatekeeper:
		return result == "fail"
	}
	return info.ReportsResult(result)
}

// AddEngine records that the cluster runs engine, once, keeping PolicyEngines' order (so a
// summary's content does not change with the order its parts were read in).
func (e *EngineInfo) AddEngine(engine PolicyEngine) {
	if slices.Contains(e.Engines, engine) {
		return
	}
	e.Engines = append(e.Engines, engine)
	order := PolicyEngines()
	slices.SortFunc(e.Engines, func(a, b PolicyEngine) int { return slices.Index(order, a) - slices.Index(order, b) })
}
