// Package fleet starts a local fleet of real Kubernetes parts on 127.0.0.1, without Docker: one
// etcd, a hub kube-apiserver and N managed kube-apiservers (one etcd, different prefixes), a real
// cluster-gateway registered with the hub through the aggregation layer and reachable directly, each
// managed cluster registered as a gateway credential Secret, the CRDs of policyhub, Kyverno,
// openreports, OCM and KubeVela installed, and, per cluster, real Kyverno admission and reports
// controllers and a real OPA Gatekeeper (webhook, audit and status).
//
// The binaries come from `make testbin` (a cache outside the clone, see hack/testbin.sh). Every
// process writes its log under Fleet.LogDir; every port is picked free, so two fleets can run at
// once. Stop ends every process (apiservers before etcd); the processes are also tied to the test
// process with a parent-death signal, so nothing outlives a test binary that panics or times out.
//
// It is test substrate: e2e tests, benchmarks and `make demo` use it; product code never does.
package fleet
