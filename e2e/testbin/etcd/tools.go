//go:build tools

// Package tools pins etcd's server command (the main package at the root of go.etcd.io/etcd/server/v3)
// so `go build` can build it from this module.
package tools

import _ "go.etcd.io/etcd/server/v3"
