// Package chartcheck holds the tests of the Helm charts (charts/policyhub-hub,
// charts/policyhub-agent) that need no cluster, so that `make unit` (go test -short) runs them:
// the values schema and `helm lint`, the images the Deployments run, the NetworkPolicies'
// egress, the hub chart's CRDs against config/crd, and the PromQL of the dashboard and alerts
// against the metrics the hub exports. The charts are rendered with Helm's Go SDK
// (internal/charttest) for the capabilities of `helm template` without a cluster.
//
// What needs a cluster stays in e2e: the dry-runs against the fleet's apiservers, the RBAC really
// installed, what renders for the fleet's hub (the exception fence, the admission policies that
// config/ is compared with) and the alert rules run by promtool and a real Prometheus.
package chartcheck
