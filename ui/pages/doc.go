// Package pages turns a snapshot of the hub (read.Snapshot) into what each page of the web view
// shows: the fleet's compliance grid, a declaration, a cluster, an application. It is pure: values
// in, values out, no client; the server renders what it returns.
package pages
