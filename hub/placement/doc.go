// Package placement decides which managed clusters a declaration runs in, and how.
//
// The inventory is cluster-gateway's: its credential Secrets (their labels are the clusters'
// labels), merged with OCM ManagedCluster labels where OCM is installed; OCM PlacementDecisions
// answer placementRef. Selection and cluster overrides are pure functions over that inventory, so
// they are table-tested without a cluster; ReadInventory is the one part that reads the hub.
package placement
