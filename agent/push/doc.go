// Package push writes the agent's two objects to the cluster's namespace on the hub, both by
// server-side apply with the field manager "policyhub-agent" (the agent never writes status,
// which is the hub's):
//
//   - the PolicyReportSummary named "summary": content. It is pushed once at start, then only
//     when its content hash changed, never sooner than Options.Interval after the previous push,
//     so a busy cluster costs the hub at most one write per interval and a quiet one none.
//   - the coordination.k8s.io/v1 Lease named "policyhub-agent" (LeaseName): liveness, as kubelets
//     renew node Leases (KEP-589). It is renewed at start and then every Options.Heartbeat
//     (holderIdentity the cluster, leaseDurationSeconds three heartbeats, renewTime now), so the
//     hub can tell a live agent from a gone one without the summary, and everything derived from
//     it, being rewritten every heartbeat.
//
// The two run in separate loops (Run starts both; agent.Run starts RenewLease first, so the hub
// sees a restarted agent alive before its first full read of the cluster), each retrying its
// own failures with a doubling backoff: a hub that refuses or stalls one kind of write never
// delays the other.
//
// A hub that cannot be reached never stops the Pusher. Every summary attempt rebuilds the
// summary, so what lands on the hub after an outage is the latest content, not the one that
// first failed; and after a failed attempt the hub's state is unknown, so the next attempt writes
// whatever the latest build is, even when its hash equals the last successful push's. Lease
// renewals retry at least once a heartbeat, and their failures are logged when they start,
// change and end, not once per attempt.
//
// The scheduling decisions (when to build, whether to write, when to renew, how long to back
// off) are pure functions of the loops' state and the clock, unit-tested here; the loops run
// against a fake hub in virtual time (testing/synctest) in run_test.go, and the writes against
// real kube-apiservers in e2e/agent_push_outage_test.go.
package push
