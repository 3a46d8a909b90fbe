// Package controllers holds the hub's wiring (SetupHub) and its reconcilers: one file per
// declaration kind (FleetPolicy, PolicySet, ApplicationPolicy, FleetPolicyException), each the
// kind's Declaration for hub/engine, which runs them all; and the reconcilers of the agents'
// summaries and of clusters leaving the fleet.
package controllers
