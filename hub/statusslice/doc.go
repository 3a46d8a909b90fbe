// Package statusslice keeps a declaration's per-cluster state in ClusterStatusSlices: it reads a
// declaration's slices back into one list, and splits a new list over them so that a change in
// one cluster rewrites only the slice holding it (results → status, beside the declaration's
// bounded status).
package statusslice
