// Package e2e holds the tests that run on a local fleet (see e2e/fleet): real kube-apiservers, a
// real cluster-gateway and real Kyverno. The tests of this package share one fleet, started in
// TestMain. The wrapper modules that build the fleet's binaries live in e2e/testbin.
//
// A test file's name says what it tests, by its first word:
//
//	apis_, samples_, validation_  the CRDs as the hub's apiserver serves them: schemas, CEL, samples
//	gateway_, fleet_, kyverno_    the real parts themselves, before policyhub: cluster-gateway, the
//	                              fleet's processes, what Kyverno enforces and honours
//	sync_                         one pass of hub/work over a cluster (Lease, plan, write, prune)
//	hub_                          the hub's controllers in process: placement, dispatch, status,
//	                              drift, departures, replicas (as processes), tenants' budgets
//	agent_                        the agent: collect, summarize, push, its identity on the hub
//	apppolicy_, kubevela_         ApplicationPolicies, and KubeVela's Applications through vela-core
//	policyset_, library_, source_ PolicySets and where their libraries come from (OCI, Git, ConfigMaps)
//	exception_                    FleetPolicyExceptions: approval, fence, rendering, expiry
//	rollout_                      progressive rollouts: waves, gates, approval
//	tenant_                       what a tenant can and cannot reach
//	cli_                          kubectl policyhub against the fleet
//	ui_                           the web view, in a real browser
//	prometheus_                   the chart's alert rules and dashboard in a real Prometheus
//	charts_                       the Helm charts on the fleet: dry-run against its apiservers, RBAC
//	                              installed, rendered for its hub (those that need no cluster are
//	                              in charts/chartcheck, run by make unit)
//	gatekeeper_                   Gatekeeper as an engine: templates and Constraints shipped,
//	                              enforced, audited and reported (cluster-4 runs it, cluster-5
//	                              no engine)
//	demo_                         make demo, end to end
//
// Some tests run one after another. Those that mostly wait call inParallel first and run side by
// side once the others are done, each with a hub of its own scoped to its declarations; a test
// that needs a cluster of its own takes an alias of a fleet cluster (aliasCluster) or a fleet of
// its own (useOwnFleet); the KubeVela tests take turns in a lane (inLane). See
// parallel_helpers_test.go for what keeps a test serial.
package e2e
