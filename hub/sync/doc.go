// Package sync writes declarations' rendered policies into one managed cluster through
// cluster-gateway: under the cluster's sync Lease (so at most one writer — hub replica, other hub
// or CLI — writes a cluster at a time), with server-side apply, ownership-safe pruning, drift
// correction and dry-run.
package sync
