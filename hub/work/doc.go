// Package work is the hub's per-cluster engine: what the hub does to one managed cluster through
// cluster-gateway. A Syncer makes one pass over a cluster for the declarations it is given —
// capability check (kinds the cluster does not serve: Unsupported; legacy kinds its Kyverno no
// longer executes: NotEnforced), plan against a watch cache of the cluster's owned policies, writes under the
// cluster's sync Lease (so at most one writer — hub replica, other hub or CLI — writes a cluster
// at a time) with server-side apply, ownership-safe pruning and dry-run. Workers give each cluster
// one worker that owns it: the desired state handed to it, its passes, its health, and the
// per-declaration results it publishes.
//
// Files by job: worker.go (the Workers: a worker per cluster, what is wanted of it and what it
// answered), worker_run.go (a worker's loop and its passes), slots.go (the pass slots, inherited clusters first), syncer.go (clients and caches per cluster), lease.go (the sync Lease; a dead replica's taken at once), pass.go
// (one pass), plan.go (desired vs live), write.go (server-side apply and prune), result.go (what
// a pass reports), action.go (the typed actions of a plan), capability.go and legacy.go (what the
// cluster serves and what its Kyverno enforces).
package work
