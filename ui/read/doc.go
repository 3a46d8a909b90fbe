// Package read is where the web view reads the hub: one watch per kind, whatever the fleet's size
// (FleetPolicies, PolicySets, ApplicationPolicies, FleetPolicyExceptions, ClusterStatusSlices,
// the agents' summaries reduced to their counts, and the inventory's labels), held in a cache
// every page shares, so a page view costs the hub no request. Each change is published as a
// topic (the cluster or declaration it concerns) for the pages that follow changes live. The
// kinds the user may not list are left out, and said so (Scope).
package read
