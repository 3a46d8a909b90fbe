// Package admission holds policyhub's admission policies for the hub, the YAML files beside it
// that users install (kubectl apply, or the hub chart, which renders the same policies): the hub
// reads the exceptions' fence from here to tell whether the one installed is the one it relies on.
package admission
