// Package declare decides what a declaration wants, for the hub's reconcilers and for
// `kubectl policyhub sync --dry-run` alike, so that the preview and the sync cannot drift
// apart: whether its lifecycle (deletion, suspension, prune) lets it sync, and which objects
// each cluster gets — a FleetPolicy by its placement and rollout, an ApplicationPolicy by its
// placement or, without one, its KubeVela Application's topology. It runs the flow in order:
// place (hub/placement), roll out (hub/rollout), render (hub/render); none of those calls another.
package declare
