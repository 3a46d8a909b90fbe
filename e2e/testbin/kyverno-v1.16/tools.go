//go:build tools

// Package tools pins Kyverno 1.16's admission and reports controllers, so `go build` can build
// them from this module.
package tools

import (
	_ "github.com/kyverno/kyverno/cmd/kyverno"
	_ "github.com/kyverno/kyverno/cmd/reports-controller"
)
