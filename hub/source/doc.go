// Package source reads the policies a declaration takes from elsewhere, before the hub's flow
// declares, places and renders them: a policy library as `kyverno oci push` writes it to an OCI
// registry (PullOCI), or the YAML under a folder of a Flux source's artifact, a Git repository's
// for one (FetchArchive). What it returns is bounded (policies, bytes), pinned (the manifest's digest) and
// reduced to what a policy is (apiVersion, kind, name, namespace, labels, annotations, spec):
// an artifact is as hostile as any other input until checked.
package source
