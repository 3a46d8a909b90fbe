package e2e

import "fmt"

// vapTeamPolicy is a FleetPolicy (name, in mode, placed on cluster) carrying a Kubernetes
// ValidatingAdmissionPolicy that requires a team label on the Deployments of namespace ns.
func vapTeamPolicy(name, mode, cluster, ns string) string {
	return fmt.Sprintf(`
metadata: {name: %s}
spec:
  mode: %s
  placement: {clusters: [%s]}
  template:
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingAdmissionPolicy
    spec:
      failurePolicy: Fail
%s      validations:
      - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
        message: Deployments need a team label
`, name, mode, cluster, deploymentsMatch(ns, 6))
}
