// Package dryruns counts the server-side dry-runs (kubectl apply --dry-run=server) among the
// admissions Kyverno refused, so a refused-admission count (a rollout gate's input) can leave
// them out: Kyverno's Events for a dry-run refusal are those of a real one, but the admission
// controller's counter kyverno_policy_results_total marks them (dry_run="true").
//
// Only the legacy kinds (ClusterPolicy, Policy) are counted: the counter of the CEL kinds
// (kyverno_validating_policy_execution_*) has no dry_run label.
//
// Files: parse.go reads a Prometheus text exposition, bounded and validated (it comes from the
// managed cluster); window.go keeps counter samples per endpoint and takes their increase over
// a window (resets handled as Prometheus increase() does); endpoints.go chooses the admission
// controller Pods' metrics URLs; scrape.go fetches one endpoint, bounded in time and bytes.
// All but scrape.go are pure and tested without a cluster.
package dryruns
