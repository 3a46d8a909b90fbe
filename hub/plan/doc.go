// Package plan decides, for one declaration in one cluster, which rendered objects may be applied,
// which are Conflicts (an object with the same group, kind, namespace and name that this hub's
// declaration does not own) and which owned objects are no longer wanted and may be pruned.
//
// Whether an applied object is created, updated or unchanged is decided by the server-side apply
// dry-run in hub/sync, which sees drift the labels cannot show. Pure: values in, values out.
package plan
