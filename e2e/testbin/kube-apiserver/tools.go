//go:build tools

// Package tools pins the kube-apiserver, kube-controller-manager and kubectl commands so `go build`
// can build them from this module (the controller-manager runs the fleet's garbage collector and
// namespace controller; kubectl is the baseline of the sync benchmark).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
