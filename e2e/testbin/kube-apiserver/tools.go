//go:build tools

// Package tools pins the kube-apiserver and kubectl commands so `go build` can build them from
// this module (kubectl is the baseline of the sync benchmark).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
