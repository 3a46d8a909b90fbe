// Package rollout decides the progressive rollout of one FleetPolicy across ordered waves of
// clusters: which placed cluster is in which wave, where each wave is, and which mode each
// cluster runs. Each wave first runs the policy in Audit; once every cluster of it holds the
// current version and reported on it, the wave is promoted to Enforce when its gate holds (at
// most so many fail results and would-be-blocked admissions), has held for the soak time and,
// where asked, was approved; then the next wave starts. A wave never moves backwards by itself;
// a paused rollout does not move.
//
// It is pure: the previous state, the measurements and the time in, the next state out. The
// hub's FleetPolicy controller reads the measurements from the agents' summaries, applies the
// modes and keeps the state in the FleetPolicy's status.
package rollout
