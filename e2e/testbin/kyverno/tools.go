//go:build tools

// Package tools pins Kyverno's admission and reports controllers, and its CLI (`kyverno oci
// push` writes the policy artifacts the hub reads), so `go build` can build them from this module.
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"
	_ "github.com/kyverno/kyverno/cmd/kyverno"
	_ "github.com/kyverno/kyverno/cmd/reports-controller"
)
