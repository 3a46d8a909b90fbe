// Package benchkit holds what the local-fleet benchmarks (syncbench, scalebench) share, so that
// both measure the same workload the same way: the benchmark's ClusterPolicy, the FleetPolicy
// that places it, and the pool that sends such work n requests at a time.
package benchkit
