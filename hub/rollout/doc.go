// Package rollout decides the progressive rollout of one declaration across ordered waves of
// clusters (issue 18): which wave is where, and which mode each cluster runs. Each wave first
// runs the policy in Audit; once its clusters' agents reported on the current version, it is
// promoted to Enforce when its gate holds (at most so many fail results and would-be-blocked
// admissions), has held for the soak time and, where asked, was approved; then the next wave
// starts. A wave never moves backwards by itself; a paused rollout does not move.
//
// It is pure: the previous state, the measurements and the time in, the next state out. The
// hub's controller reads the measurements from the agents' summaries and applies the modes.
// (Not wired into the controllers yet: spec.rollout does not exist yet.)
package rollout
