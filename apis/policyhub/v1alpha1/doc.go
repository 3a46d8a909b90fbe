// Package v1alpha1 holds the policyhub.io/v1alpha1 API: FleetPolicy (fleet-wide Kyverno policies),
// ApplicationPolicy (policies scoped to one application's resources) and PolicyReportSummary (the
// bounded compliance summary an agent pushes for its cluster).
//
// What can be checked at admission is checked there with CEL (x-kubernetes-validations), so bad
// declarations are refused with a clear message before anything is dispatched to a cluster.
// In markers, test for an empty string with size(x) > 0: gofmt rewrites two single quotes in a
// comment into a typographic quote, which breaks the rule (crd_test.go guards this).
//
// +kubebuilder:object:generate=true
// +groupName=policyhub.io
package v1alpha1
