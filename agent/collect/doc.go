// Package collect watches what a managed cluster knows about its compliance — Kyverno's policy
// reports (wgpolicyk8s.io, and openreports.io where served, including report APIs that appear
// after start), Kyverno's policy-violation Events for blocked admissions, the policies'
// annotations, and the application label of the resources reports are about — and keeps only
// compact digests of them: never whole reports, never whole resources. engine.go adds the
// cluster's engine: Kyverno's controllers' Deployments, the policy APIs served and the metadata
// of the legacy objects (agent/engine tells what they mean).
package collect
