// Package evaluate evaluates a cluster's existing resources against its Kubernetes
// ValidatingAdmissionPolicies in the background, with the API server's own admission code
// (k8s.io/apiserver/pkg/admission/plugin/policy/validating: its compiler, matcher and
// dispatcher), and returns the results as collect Digests of engine Kubernetes: the API server
// keeps no results of its own, it only refuses (Deny) or warns and audits at admission.
//
// Files: compile.go compiles a policy as the API server does; set.go decides, for one object,
// each policy's result and the API server's message (pure: objects, policies, bindings and
// namespaces in memory; table-tested); targets.go chooses the resource types to list from the
// policies' match rules and discovery (pure); list.go reads the cluster, bounded and paged;
// pass.go is one evaluation (read, judge what changed, say what was left out); run.go
// re-evaluates on a policy or binding change and on an interval, and is the Collector's Source;
// refusals.go counts the API server's refusals from its /metrics.
package evaluate
