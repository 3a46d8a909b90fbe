package collect

import "context"

// Source is another engine's contribution to a snapshot, e.g. the background evaluation of the
// API server's own admission policies (agent/evaluate): the collector runs it beside its
// informers, waits for it in Synced and lets it add to every Snapshot.
type Source interface {
	// Run runs until ctx ends, calling changed (cheap, coalesced) whenever what it would add
	// may have changed.
	Run(ctx context.Context, changed func()) error
	// Synced says whether the source has read the cluster once.
	Synced() bool
	// AddTo adds what the source knows now to s: digests, policies, applications, blocks and
	// engine facts. It must not block on the cluster.
	AddTo(s *Snapshot)
}
