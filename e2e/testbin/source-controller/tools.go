//go:build tools

// Package tools pins Flux's source-controller, so `go build` can build it from this module.
package tools

import (
	_ "github.com/fluxcd/source-controller"
)
