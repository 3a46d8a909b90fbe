//go:build tools

// Package tools pins the cluster-gateway apiserver command so `go build` can build it from this module.
package tools

import _ "github.com/oam-dev/cluster-gateway/cmd/apiserver"
