// Package summarize folds what the agent collected in its cluster (collect.Snapshot) into the
// PolicyReportSummarySpec it pushes to the hub: totals, results per policy and per application,
// blocked admissions, the top violations and the results each Kyverno PolicyException exempted;
// and, apart, what each shadow (a report-only copy of a candidate policy, told by its name) would
// judge beside its live policy, resource by resource. A shadow's results are never compliance:
// they are in no total, policy, application, namespace, violation or exception.
//
// It is pure: values in, values out, no clients and no clock, so it is tested without a cluster.
// It is bounded: a cluster of 50k resources and 200 policies still yields a summary well under
// etcd's request limit; what is cut is counted in spec.truncated, and the totals always cover
// everything. It is deterministic: the same snapshot, whatever the order of its slices and maps,
// gives the same bytes and the same content hash, so an unchanged cluster pushes nothing.
//
// Files: summarize.go (Summarize, the options, the size bound, Hash), fold.go (interning and
// counting a snapshot), keep.go (the top policies, applications, violations and exceptions in
// the API's form), shadow.go (each shadow's verdicts compared with its live policy's), topk.go
// (the top-k heap, the orders it keeps by, a tally of values).
package summarize
