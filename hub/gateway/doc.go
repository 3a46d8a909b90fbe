// Package gateway reaches managed clusters through cluster-gateway (oam-dev): it builds a
// per-cluster rest.Config on the gateway's proxy path and names the parts of the gateway's contract
// (credential Secrets and their labels) the hub relies on.
//
// cluster-gateway is used through its REST contract only; its Go packages do not build with the
// Kubernetes libraries policyhub uses (see FIELD-NOTES.md).
package gateway
