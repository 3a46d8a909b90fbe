// Package controllers holds the hub's reconcilers, one per kind. The declaration reconcilers
// (FleetPolicy, ApplicationPolicy) share one engine, in two halves along the flow: the dispatch
// half (declare: placement → rollout → render; the wanted state to the clusters' workers) and the
// status half (the workers' results and the agents' summaries → ClusterStatusSlices, status,
// Events, metrics), which meet in the reconciler's results room: the dispatch half's last
// rendering, reused until what it was made from moves, and what was announced and when. A
// finalizer prunes the declaration's policies from every cluster when it is deleted (finalize.go).
package controllers
