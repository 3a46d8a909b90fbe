//go:build tools

// Package tools pins KubeVela's controller command (vela-core) so `go build` can build it from this module.
package tools

import _ "github.com/oam-dev/kubevela/cmd/core"
