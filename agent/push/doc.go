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
// Pacing (issue 48): the hub publishes in the summary's status.pacing each cluster's share of
// what its API server takes (SummaryPacing: a PushInterval and a HeartbeatInterval sized to the
// fleet). The agent learns it from every summary write's response (the apply's and the patch's
// are the whole object: no extra request) and, since a quiet agent never pushes, from a read of
// its summary at start and every tenth renewal (resourceVersion 0: served from the apiserver's
// cache). What it reads is checked: out of bounds (MinPushInterval, MinHeartbeatInterval,
// MaxPacingInterval) it is clamped, unreadable it is ignored, each said once; none published (an
// older hub) leaves the agent's own flags. The flags are floors: the agent keeps the longer of
// its own and the published intervals, and logs each change of pace once (old → new, why).
//
// Under a share longer than Interval, a change that is urgent (urgent: fail, error or blocked
// counts, the policies or shadows listed, engine facts, truncation) is still pushed Interval
// after the last push, from a reserve of UrgentPushes refilled one every PushInterval; any other
// change (pass, warn or skip counts, result times, messages) waits until PushInterval after the
// last push, when the latest build is pushed: deferred, never lost. Every push spends one of the
// reserve, so over time an agent writes at most once a PushInterval, in bursts of UrgentPushes.
// A changed heartbeat is kept from the next renewal, which applies the whole Lease to last three
// of it; the summary announces it (spec.heartbeatInterval) from its next push.
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
