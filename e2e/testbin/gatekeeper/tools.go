//go:build tools

// Package tools pins Gatekeeper's controller (the main package at the root of
// github.com/open-policy-agent/gatekeeper/v3) so `go build` can build it from this module.
package tools

import _ "github.com/open-policy-agent/gatekeeper/v3"
