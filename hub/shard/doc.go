// Package shard shares the fleet between the hub's replicas by cluster. Each replica holds a
// Lease of its own on the hub (Hold, with client-go's leaderelection machinery); the live
// replicas are the live Leases, judged by the hub's clock (Members). Every replica computes the
// same assignment from the same inventory and members (Assign: consistent hashing with bounded
// loads), so no replica coordinates with another: each works only the clusters it owns, and the
// clusters' own sync Leases stay the write fence while two replicas' views differ for a moment.
package shard
