// Package heartbeat records when the hub last heard each cluster's agent renew its Lease
// (policyhubv1.AgentLeaseName in the cluster's hub namespace), by the hub's own clock. Liveness
// is not content: an agent with nothing new renews its Lease, as a kubelet renews its node Lease,
// and the hub keeps its results fresh without anything being rewritten (hub/aggregate judges
// staleness from this and the summary).
package heartbeat
