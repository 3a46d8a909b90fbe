// Package app is kubectl-policyhub: one file per command, Run as the entry point (the binary and
// the end-to-end tests both call it). Exit codes: 0 ok, 1 violations or denials found, 2 usage
// or runtime error, each error printed as one line saying what to do.
package app
