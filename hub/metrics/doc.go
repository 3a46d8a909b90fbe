// Package metrics defines the hub's Prometheus metrics. Labels are bounded: clusters, actions,
// reasons, results, the names of policies and applications (bounded by what a summary may
// hold), and a rollout's waves (at most 20 per FleetPolicy) and their five states — never a
// resource (see DESIGN's metrics rules).
package metrics
