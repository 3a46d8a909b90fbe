// Package engine tells, from what a managed cluster offers, what its Kyverno is and what legacy
// objects it holds: the version and settings of Kyverno's admission controller (from its
// Deployment: image tag and container flags), the Kyverno policy APIs the cluster serves, and an
// inventory of the kyverno.io legacy objects (ClusterPolicy, Policy, the cleanup policies,
// PolicyException) by kind and owner, bounded in memory at any number of objects.
//
// It is pure (values in, values out; the Inventory is a store the collector's reflectors fill),
// so it is tested without a cluster. Files: kyverno.go (Deployments to KyvernoFacts),
// apis.go (served group/versions to PolicyAPIs), legacy.go (the legacy inventory).
package engine
