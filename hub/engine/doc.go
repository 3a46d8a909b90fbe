// Package engine runs every declaration kind's lifecycle, a file per phase of the flow:
// lifecycle.go (finalizer, suspend, finalize) → dispatch.go (place → render → the wanted state to
// the clusters' workers) → collect.go (the workers' outcomes and the agents' summaries → each
// cluster's state, and whether its reports are fresh) → status.go (the declaration's bounded
// status, written once per reconcile) → slices.go (the ClusterStatusSlices) and events.go; with
// share.go (this replica's share of the fleet), watch.go (what wakes a declaration), room.go (the
// results room: the dispatch half's last rendering, reused until what it was made from moves, and
// what was announced and when) and results.go (the workers' results waking their declarations)
// beneath them.
//
// A kind is a Declaration (engine.go): what its spec renders, how its results and progress read,
// what follows a status write. The engine names no kind: the wiring pairs each of
// policyhubv1.DeclarationKinds with its reconciler in a Registry (kind.go).
package engine
