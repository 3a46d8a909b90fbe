// Package metrics defines the hub's Prometheus metrics. Labels are bounded: clusters, actions,
// reasons — never a resource or a policy object's name (see DESIGN's metrics rules).
package metrics
