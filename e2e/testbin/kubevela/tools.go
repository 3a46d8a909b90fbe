//go:build tools

// Package tools pins KubeVela's controller command (vela-core) and its CLI (vela, which enables
// addons) so `go build` can build them from this module.
package tools

import (
	_ "github.com/oam-dev/kubevela/cmd/core"
	_ "github.com/oam-dev/kubevela/references/cmd/cli"
)
