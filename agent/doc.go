// Package agent runs policyhub-agent's stages together: collect (informers in the managed
// cluster) → summarize (a bounded summary) → push (to the cluster's namespace on the hub). The
// binary and the end-to-end tests both run an agent through Run.
package agent
