package main

import (
	"fmt"
	"time"
)

// printPacedBusy prints the paced busy fleet's rows (-busy-paced) of the virtual scenario's table.
func printPacedBusy(r *result, o options) {
	q := &r.busy
	fmt.Printf("| busy fleet (paced): %d agents pushing as they schedule; each round of %s moves the fail count of a share %.2f of the clusters, in turn, and the pass count of the others; %d rounds in %s | round 0 (the agents' start push) in every status %s after the start; cluster 0's pace %s push interval / %s heartbeat |\n",
		r.clusters, o.busyEvery, q.failShare, q.rounds, q.took.Round(time.Second), q.startTook.Round(time.Second), q.pushInterval, q.heartbeat)
	fmt.Printf("| busy fleet (paced): pushes in the window | %d (%.1f a second) |\n", q.pushes, float64(q.pushes)/q.took.Seconds())
	fmt.Printf("| busy fleet (paced): cores (above settled) | %s |\n", coresLine(q.cores, r.state.idleCores))
	fmt.Printf("| busy fleet (paced): mutating requests to the hub's apiserver | %s |\n", writesLine(q.hubWrites))
	fmt.Printf("| busy fleet (paced): bytes written a minute: FleetPolicy and ClusterStatusSlice versions / summaries | %s / %s |\n", mib(q.statusBytesPerMin), mib(q.summaryBytesPerMin))
	if o.busyMoves == "pass" {
		fmt.Printf("| busy fleet (paced): a change → every FleetPolicy's slices | not measured: pass counts alone are not written |\n")
	} else {
		fmt.Printf("| busy fleet (paced): a round moved the cluster's fail count → every FleetPolicy's slices show it | %s |\n", latencyLine(q.changeLatencies, q.changeNotReached))
		fmt.Printf("| busy fleet (paced): the summary with that fail count landed → every FleetPolicy's slices show it | %s |\n", latencyLine(q.latencies, q.notReached))
	}
	fmt.Printf("| busy fleet (paced): each cluster's last round in its summary on the hub, the agents kept running %s after the rounds | %d of %d clusters (%d not) |\n",
		q.drainTook.Round(time.Second), q.lastLanded, r.clusters, q.lastMissing)
}

// printPacedBusyTargets prints issue 48's targets for the paced busy fleet.
func printPacedBusyTargets(v *result, scale string, verdict func(bool) string) {
	q := &v.busy
	p99 := percentile(q.changeLatencies, 99)
	cores := q.cores[partHubAPIServer]
	fmt.Printf("| 1000 × 50 busy fleet, paced (fail share %.2f): hub apiserver ≤ 0.5 cores | %.2f cores%s | %s |\n", q.failShare, cores, scale, verdict(cores <= 0.5))
	fmt.Printf("| 1000 × 50 busy fleet, paced: a fail count change in every status p99 ≤ 10 s | p99 %.2fs, %d never%s | %s |\n", p99, q.changeNotReached, scale,
		verdict(len(q.changeLatencies) > 0 && q.changeNotReached == 0 && p99 <= 10))
	fmt.Printf("| 1000 × 50 busy fleet, paced: pass-only churn deferred without loss | last round on the hub for %d of %d clusters%s | %s |\n", q.lastLanded, v.clusters, scale,
		verdict(q.lastMissing == 0 && q.lastLanded == v.clusters))
}
