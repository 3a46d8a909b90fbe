// Package controllers holds the hub's reconcilers, one per kind. The FleetPolicy reconciler runs
// the hub's flow for one declaration: placement → render → sync (plan inside) → status, Events and
// metrics; a finalizer prunes the declaration's policies from every cluster when it is deleted.
package controllers
