// Package engine runs every declaration kind's lifecycle, one file per phase of the flow:
// lifecycle.go (finalizer, suspend, finalize) → dispatch.go (place → render → the wanted state to
// the clusters' workers) → collect.go (the workers' outcomes and the agents' summaries → each
// cluster's state) → status.go (the declaration's bounded status, Events) → slices.go (the
// ClusterStatusSlices), with share.go (this replica's share of the fleet) and room.go (the results
// room: the dispatch half's last rendering, reused until what it was made from moves, and what was
// announced and when) beneath them.
//
// A kind is a Declaration (engine.go): what its spec renders, how its results and progress read,
// and what follows a status write. The engine knows no kind by name; the wiring registers the
// kinds (Kind, Registry).
package engine
