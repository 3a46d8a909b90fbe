// Package push writes the cluster's PolicyReportSummary to the hub: one object, named "summary",
// in the hub namespace named after the cluster, by server-side apply with the field manager
// "policyhub-agent" (the agent never writes status, which is the hub's).
//
// A Pusher pushes once at start, then only when the summary's content hash changed, never
// sooner than Options.Interval after the previous push, so a busy cluster costs the hub at most
// one write per interval and a quiet one none — apart from the heartbeat: when Options.Heartbeat
// has passed since the last push, the unchanged summary is pushed again (only generatedAt moves),
// so the hub can tell a live agent from a gone one.
//
// A hub that cannot be reached never stops the Pusher: it retries with a doubling backoff, and
// every attempt rebuilds the summary, so what lands on the hub after an outage is the latest
// content, not the one that first failed. After a failed attempt the hub's state is unknown, so
// the next attempt writes whatever the latest build is, even when its hash equals the last
// successful push's.
//
// The scheduling decisions (when to build, whether to write, how long to back off) are pure
// functions of the Pusher's state and the clock, unit-tested here; the writes are tested against
// real kube-apiservers in e2e/agent_push_outage_test.go.
package push
