package v1alpha1

import (
	"fmt"
	"strings"
)

// Conventions the agent, the hub and the CLI share: each is defined here once, so that what an
// agent writes and what the hub and the CLI read cannot drift apart.

// PolicyRef names a policy the way Kyverno's reports do, and so summaries: "name" for a
// cluster-scoped policy, "namespace/name" for a namespaced one (e.g. applications[].policy).
func PolicyRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// severities are Kyverno's severities (policies.kyverno.io/severity), most severe first.
var severities = [...]string{"critical", "high", "medium", "low", "info"}

// SeverityRank orders severities for sorting, most severe first (critical is 0); an unknown or
// missing severity ranks after every known one. Case does not matter.
func SeverityRank(severity string) int {
	for i, s := range severities {
		if strings.EqualFold(severity, s) {
			return i
		}
	}
	return len(severities)
}

// Accepted says why the hub does not aggregate a summary (nil when it does): it reads only the
// summary named SummaryName in a cluster's namespace, written for that cluster (an agent may
// write only its own cluster's namespace; a summary claiming another cluster is refused).
func (s *PolicyReportSummary) Accepted() error {
	if s.Name != SummaryName {
		return fmt.Errorf("the hub reads only the summary named %q in each cluster's namespace; %q is not aggregated", SummaryName, s.Name)
	}
	if s.Spec.Cluster != s.Namespace {
		return fmt.Errorf("spec.cluster %q does not match the namespace %q the summary was written to: each cluster's agent writes only its own namespace, so this summary is not aggregated", s.Spec.Cluster, s.Namespace)
	}
	return nil
}
