// Package metrics defines the hub's Prometheus metrics. Labels are bounded: clusters, actions,
// reasons, results, and the names of policies and applications (bounded by what a summary may
// hold) — never a resource (see DESIGN's metrics rules).
package metrics
