// Package aggregate folds the agents' PolicyReportSummaries into what the hub reports: the
// results of the policies a declaration owns in a cluster, and whether a summary is stale or
// trustworthy at all. Pure: summaries and times in, values out.
package aggregate
