package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func (b *bench) print(commit string) {
	o := b.o
	fmt.Printf("\npolicyhub-hub built from %s; %d cores; %d real managed clusters (-real %d), %d cluster names (-virtual), %d FleetPolicies; each wait's deadline %s\n",
		commit, cores(), len(b.f.Managed), o.real, o.virtual, o.policies, o.timeout)
	for _, n := range b.notes {
		fmt.Printf("note: %s\n", n)
	}
	if line := b.relayLine(); line != "" {
		fmt.Printf("note: %s\n", line)
	}

	fmt.Println("\nThe hub settled after converging (idle: a hub with no cluster and no FleetPolicy):")
	fmt.Println()
	fmt.Println("| scenario | clusters × FleetPolicies | converge | hub RSS | hub goroutines | watches open in the clusters | statuses at the end |")
	fmt.Println("|---|---|---|---|---|---|---|")
	fmt.Printf("| idle | 0 × 0 | – | %s | %s | %+.0f | – |\n", mib(b.idle.rss), goroutines(b.idle), b.idle.watches)
	for _, r := range b.results {
		conv := fmtDur(r.converge, r.converged, o.timeout)
		if !r.converged {
			conv += fmt.Sprintf(" (%d cluster entries not Synced)", r.missing)
		}
		if r.name == "dark" {
			conv += " (healthy names)"
		}
		fmt.Printf("| %s | %d × %d | %s | %s | %s | %.0f | %s |\n", r.name, r.clusters, len(r.fps), conv, mib(r.state.rss), goroutines(r.state), r.state.watches, r.phases)
	}

	fmt.Println("\nCPU seconds while converging (from the first FleetPolicy created until converged or the deadline):")
	fmt.Println()
	fmt.Println("| scenario | " + strings.Join(parts, " | ") + " |")
	fmt.Println("|---|" + strings.Repeat("---|", len(parts)))
	for _, r := range b.results {
		line := "| " + r.name + " |"
		for _, p := range parts {
			line += fmt.Sprintf(" %.1f |", r.cpu[p])
		}
		fmt.Println(line)
	}

	fmt.Println("\nMutating requests the hub's kube-apiserver served while converging (the benchmark's own FleetPolicy creations included), by resource:")
	fmt.Println()
	for _, r := range b.results {
		fmt.Printf("- %s: %s\n", r.name, writesLine(r.hubWrites))
	}

	fmt.Println("\nSettled: cores used over 10 s once the hub was quiet, and memory of the gateway and the hub's apiserver:")
	fmt.Println()
	fmt.Println("| scenario | settled after | " + strings.Join(parts[:4], " cores | ") + " cores | cluster-gateway RSS | hub kube-apiserver RSS |")
	fmt.Println("|---|---|" + strings.Repeat("---|", 6))
	states := append([]*result{{name: "idle", state: b.idle}}, b.results...)
	for _, r := range states {
		settled := r.state.settleTook.Round(time.Second).String()
		if !r.state.settled {
			settled = fmt.Sprintf("never (hub still at %.2f cores after %s)", r.state.settleResidue, r.state.settleTook.Round(time.Second))
		}
		line := fmt.Sprintf("| %s | %s |", r.name, settled)
		for _, p := range parts[:4] {
			line += fmt.Sprintf(" %.3f |", r.state.idleCores[p])
		}
		fmt.Printf("%s %s | %s |\n", line, mib(r.state.gatewayRSS), mib(r.state.hubAPIRSS))
	}

	fmt.Println("\nCost of one cluster to the hub: (settled value − idle hub's value) / clusters:")
	fmt.Println()
	fmt.Println("| scenario | clusters | hub RSS per cluster | goroutines per cluster | watches per cluster | hub millicores per cluster, settled |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range b.results {
		pc := b.perCluster(r)
		fmt.Printf("| %s | %d | %.0f KiB | %s | %.2f | %.2f |\n", r.name, r.clusters, pc.rss/1024, orNA(pc.goroutines, pc.goroutinesOK, "%.1f"), pc.watches, pc.millicores)
	}

	for _, r := range b.results {
		if r.name != "virtual" {
			continue
		}
		fmt.Printf("\nvirtual: %d names × %d FleetPolicies\n\n", r.clusters, len(r.fps))
		fmt.Println("| measure | value |")
		fmt.Println("|---|---|")
		fmt.Printf("| status per FleetPolicy, all Synced (JSON of .status) | max %s, median %s |\n", kib(maxOf(r.statusSynced)), kib(percentile(r.statusSynced, 50)))
		if r.agg.ran {
			fmt.Printf("| status per FleetPolicy, with every cluster's results | max %s, median %s |\n", kib(maxOf(r.statusResults)), kib(percentile(r.statusResults, 50)))
		}
		if r.noop.ran {
			settled := "settled"
			if !r.noop.settled {
				settled = "did not settle before the deadline"
			}
			recon := "n/a (controller_runtime_reconcile_total{controller=\"fleetpolicy\"} not exported)"
			if r.noop.reconOK {
				recon = fmt.Sprintf("%.0f", r.noop.reconciles)
			}
			fmt.Printf("| no-op resync (annotation touched on every FleetPolicy): until the hub is quiet | %s (%s) |\n", r.noop.took.Round(10*time.Millisecond), settled)
			fmt.Printf("| no-op resync: FleetPolicy reconciles; requests to the managed apiservers | %s; %.0f |\n", recon, r.noop.requests)
			fmt.Printf("| no-op resync: CPU seconds | %s |\n", cpuLine(r.noop.cpu))
			fmt.Printf("| no-op resync: mutating requests to the hub's apiserver (the %d annotation patches included) | %s |\n", len(r.fps), writesLine(r.noop.hubWrites))
		}
		if r.agg.ran {
			n := len(r.agg.latencies)
			fmt.Printf("| summaries written (one per name, as its agent would) | %d sent in %s (-summary-rate %.0f/s); the last stored %s after the first was sent |\n",
				r.clusters, r.agg.sendSpan.Round(10*time.Millisecond), o.summaryRate, r.agg.writeSpan.Round(10*time.Millisecond))
			lat := "none reached every status"
			if n > 0 {
				lat = fmt.Sprintf("p50 %.2fs, p99 %.2fs, max %.2fs (%d of %d)", percentile(r.agg.latencies, 50), percentile(r.agg.latencies, 99), r.agg.latencies[n-1], n, r.clusters)
			}
			if r.agg.notReached > 0 {
				lat += fmt.Sprintf("; %d not in every status within %s", r.agg.notReached, o.timeout)
			}
			fmt.Printf("| summary written → its results in every FleetPolicy's status | %s |\n", lat)
			ml := "none"
			if n := len(r.agg.metricLatencies); n > 0 {
				ml = fmt.Sprintf("p50 %.2fs, p99 %.2fs, max %.2fs (%d of %d)", percentile(r.agg.metricLatencies, 50), percentile(r.agg.metricLatencies, 99), r.agg.metricLatencies[n-1], n, r.clusters)
			}
			if r.agg.metricNotReached > 0 {
				ml += fmt.Sprintf("; %d not within %s", r.agg.metricNotReached, o.timeout)
			}
			fmt.Printf("| summary written → marked aggregated by the hub (its policyhub_policy_results series set) | %s |\n", ml)
			fmt.Printf("| clusters with policyhub_policy_results series in /metrics afterwards | %d of %d |\n", r.agg.metricClusters, r.clusters)
			fmt.Printf("| aggregation: CPU seconds (first write until the last FleetPolicy and summary status) | %s |\n", cpuLine(r.agg.cpu))
			fmt.Printf("| aggregation: mutating requests to the hub's apiserver (the %d summaries included) | %s |\n", r.clusters, writesLine(r.agg.hubWrites))
			for _, q := range r.quiet {
				fmt.Printf("| quiet fleet: %d agents renewing their Leases (%s) every %s (%s) for %s (%d renewals, %d failed): cores (above settled) | %s |\n",
					r.clusters, q.write, q.heartbeat, q.heartbeatFrom, q.took.Round(time.Second), q.renewals, q.failed, coresLine(q.cores, r.state.idleCores))
				fmt.Printf("| quiet fleet (%s): mutating requests to the hub's apiserver | %s |\n", q.write, writesLine(q.hubWrites))
			}
			if r.busy.ran && r.busy.paced {
				printPacedBusy(r, o)
			} else if r.busy.ran {
				fmt.Printf("| busy fleet: every cluster's %s count changing every %s for %s (%d rounds; %d writes skipped, the cluster's last still in flight; %d failed): cores (above settled) | %s |\n",
					o.busyMoves, o.busyEvery, r.busy.took.Round(time.Second), r.busy.rounds, r.busy.skipped, r.busy.failed, coresLine(r.busy.cores, r.state.idleCores))
				fmt.Printf("| busy fleet: mutating requests to the hub's apiserver | %s |\n", writesLine(r.busy.hubWrites))
				fmt.Printf("| busy fleet: bytes written a minute: FleetPolicy and ClusterStatusSlice versions / summaries | %s / %s |\n", mib(r.busy.statusBytesPerMin), mib(r.busy.summaryBytesPerMin))
				if o.busyMoves == "pass" {
					fmt.Printf("| busy fleet: summary written → its results in every FleetPolicy's slices | not measured: pass counts alone are not written |\n")
				} else {
					fmt.Printf("| busy fleet: summary written → its results in every FleetPolicy's slices | %s |\n", latencyLine(r.busy.latencies, r.busy.notReached))
				}
			}
			if n := len(r.cli.times); n > 0 {
				fmt.Printf("| `kubectl policyhub status NAME -o json` of one FleetPolicy: every cluster listed, %d runs | median %.2fs, max %.2fs; %d of %d clusters, %d KiB |\n",
					n, r.cli.times[n/2], r.cli.times[n-1], r.cli.listed, r.clusters, r.cli.bytes/1024)
			}
			if r.floor.ran {
				fmt.Printf("| status write floor (hub stopped): every FleetPolicy's status written once, %d at a time, fastest of %d rounds | %s (hub kube-apiserver %.1f CPU-s a round) |\n",
					floorConcurrency, r.floor.rounds, r.floor.round.Round(10*time.Millisecond), r.floor.cpu[partHubAPIServer]/float64(r.floor.rounds))
			}
		}
	}

	for _, r := range b.results {
		if r.name != "dark" {
			continue
		}
		d := r.dark
		fmt.Printf("\ndark: %d names, %d black-holed, %d refusing, %d FleetPolicies\n\n", r.clusters, d.blackHoled, d.refusing, len(r.fps))
		fmt.Println("| measure | value |")
		fmt.Println("|---|---|")
		fmt.Printf("| healthy names Synced in every FleetPolicy, this run | %s |\n", fmtDur(d.healthy, d.healthyOK, o.timeout))
		fmt.Printf("| the same names in the virtual run (none dark) | %s |\n", fmtDur(d.baseline, d.baselineOK, o.timeout))
		if ratio, ok := b.darkRatio(); ok {
			fmt.Printf("| ratio | %.2f× |\n", ratio)
		}
		failed := fmtDur(d.failed, d.failedOK, o.timeout)
		if !d.failedOK {
			failed += fmt.Sprintf(" (%d dark cluster entries not Failed)", d.failedMissing)
		}
		fmt.Printf("| every dark name Failed in every FleetPolicy (from the first created) | %s |\n", failed)
		fmt.Printf("| connections the black holes accepted | %d |\n", d.accepted)
		for _, m := range d.blackHoleMsgs {
			fmt.Printf("| a black-holed name's message | %s |\n", mdEscape(m))
		}
		for _, m := range d.refusingMsgs {
			fmt.Printf("| a refusing name's message | %s |\n", mdEscape(m))
		}
	}

	if c := b.cli; c != nil && len(c.cli.times) > 0 {
		n := len(c.cli.times)
		fmt.Printf("\nThe cli scenario: a FleetPolicy on %d clusters, its %d ClusterStatusSlices written by the benchmark:\n\n", c.clusters, (c.clusters+policyhubv1.MaxClustersPerSlice-1)/policyhubv1.MaxClustersPerSlice)
		fmt.Println("| measure | value |")
		fmt.Println("|---|---|")
		fmt.Printf("| `kubectl policyhub status NAME -o json`, every cluster listed, %d runs | median %.2fs, max %.2fs; %d of %d clusters, %d KiB |\n",
			n, c.cli.times[n/2], c.cli.times[n-1], c.cli.listed, c.clusters, c.cli.bytes/1024)
	}

	b.printSets()

	b.printReplicas()
	b.printTargets()

	fmt.Println("\nhub logs, and how long each hub took to end on SIGTERM:")
	logged := slices.Clone(b.results)
	if s := b.sets; s != nil {
		for _, r := range []*result{s.fp, s.set} {
			if r != nil && r.logPath != "" {
				logged = append(logged, r)
			}
		}
	}
	for _, r := range logged {
		stop := fmt.Sprintf("ended %s after SIGTERM", r.stopTook.Round(10*time.Millisecond))
		if r.stopKilled {
			stop = fmt.Sprintf("did not end within %s of SIGTERM: killed", stopGrace)
		}
		fmt.Printf("  %s: %d lines, %d at error level; %s: %s\n", r.name, r.logLines, r.logErrors, stop, r.logPath)
	}
}

// perClusterCost is one cluster's share of a settled hub's cost.
type perClusterCost struct {
	rss, goroutines, watches, millicores float64
	goroutinesOK                         bool
}

func (b *bench) perCluster(r *result) perClusterCost {
	n := float64(r.clusters)
	return perClusterCost{
		rss:          (r.state.rss - b.idle.rss) / n,
		goroutines:   (r.state.goroutines - b.idle.goroutines) / n,
		goroutinesOK: r.state.goroutinesOK && b.idle.goroutinesOK,
		watches:      (r.state.watches - b.idle.watches) / n,
		millicores:   1000 * (r.state.idleCores[partHub] - b.idle.idleCores[partHub]) / n,
	}
}

func (b *bench) darkRatio() (float64, bool) {
	for _, r := range b.results {
		if r.name == "dark" && r.dark.healthyOK && r.dark.baselineOK && r.dark.baseline > 0 {
			return r.dark.healthy.Seconds() / r.dark.baseline.Seconds(), true
		}
	}
	return 0, false
}

func (b *bench) printTargets() {
	o := b.o
	fmt.Println("\nTargets:")
	fmt.Println()
	fmt.Println("| target | measured | met |")
	fmt.Println("|---|---|---|")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	byName := map[string]*result{}
	for _, r := range b.results {
		byName[r.name] = r
	}
	if d := byName["dark"]; d != nil {
		if ratio, ok := b.darkRatio(); ok {
			fmt.Printf("| dark: healthy names converge ≤ 1.2× as long as without dark names | %.2f× (%s vs %s) | %s |\n", ratio,
				d.dark.healthy.Round(10*time.Millisecond), d.dark.baseline.Round(10*time.Millisecond), verdict(ratio <= 1.2))
		} else {
			fmt.Printf("| dark: healthy names converge ≤ 1.2× as long as without dark names | this run %s, without %s | %s |\n",
				fmtDur(d.dark.healthy, d.dark.healthyOK, o.timeout), fmtDur(d.dark.baseline, d.dark.baselineOK, o.timeout), verdict(false))
		}
		fmt.Printf("| dark: every dark cluster Failed within 60 s | %s | %s |\n", fmtDur(d.dark.failed, d.dark.failedOK, o.timeout),
			verdict(d.dark.failedOK && d.dark.failed <= time.Minute))
	}
	if c := b.cli; c != nil && len(c.cli.times) > 0 {
		worst := c.cli.times[len(c.cli.times)-1]
		fmt.Printf("| `kubectl policyhub status NAME` ≤ 3 s at 10,000 clusters | max %.2fs at %d clusters | %s |\n", worst, c.clusters, verdict(worst <= 3 && c.clusters >= 10000))
	}
	if s := b.sets; s != nil && s.change.ran {
		c := s.change
		n := float64(s.set.clusters)
		measured := fmt.Sprintf("%.0f objects written to %d clusters (%.2f per cluster), at most %.0f in one; every cluster at the new version: %s",
			c.ops.writes(), s.set.clusters, c.ops.writes()/n, c.ops.maxWrites, fmtDur(c.took, c.wait.ok, o.timeout))
		ok := c.opsOK && c.wait.ok && c.ops.maxWrites <= 1 && c.ops.byAction["created"] == 0 && c.ops.byAction["deleted"] == 0
		if !c.opsOK {
			measured = "n/a: policyhub_sync_operations_total not exported"
		}
		fmt.Printf("| sets: a new version of %d members with 1 changed writes 1 object per cluster (updated), no more | %s | %s |\n", s.members, measured, verdict(ok))
	}
	v := byName["virtual"]
	if v == nil {
		return
	}
	scale := ""
	if v.clusters != 1000 || len(v.fps) != 50 {
		scale = fmt.Sprintf(" (measured at %d × %d, not 1000 × 50)", v.clusters, len(v.fps))
	}
	fmt.Printf("| 1000 × 50: hub RSS ≤ 1 GiB | %s%s | %s |\n", mib(v.state.rss), scale, verdict(v.state.rss <= 1<<30))
	status := v.statusSynced
	if v.agg.ran {
		status = v.statusResults
	}
	fmt.Printf("| 1000 × 50: status ≤ 256 KiB per FleetPolicy | max %s%s | %s |\n", kib(maxOf(status)), scale, verdict(maxOf(status) <= 256*1024))
	if v.agg.ran {
		p99 := percentile(v.agg.latencies, 99)
		ok := len(v.agg.latencies) > 0 && v.agg.notReached == 0 && p99 <= 2
		m := fmt.Sprintf("p99 %.2fs", p99)
		if v.agg.notReached > 0 {
			m += fmt.Sprintf(", %d of %d never within %s", v.agg.notReached, v.clusters, o.timeout)
		}
		if v.floor.ran {
			m += fmt.Sprintf(" (the status write floor here: %s a round)", v.floor.round.Round(10*time.Millisecond))
		}
		fmt.Printf("| 1000 × 50: summary-to-status p99 ≤ 2 s | %s%s | %s |\n", m, scale, verdict(ok))
	}
	for _, q := range v.quiet {
		above := q.cores[partHubAPIServer] - v.state.idleCores[partHubAPIServer]
		declWrites := q.hubWrites["fleetpolicies/status"] + q.hubWrites["fleetpolicies"]
		fmt.Printf("| 1000 × 50 quiet fleet (%s): ≤ 0.05 hub apiserver cores above settled, 0 declaration status writes | %+.3f cores, %.0f FleetPolicy writes%s | %s |\n",
			q.write, above, declWrites, scale, verdict(above <= 0.05 && declWrites == 0))
	}
	if v.busy.ran && v.busy.paced {
		printPacedBusyTargets(v, scale, verdict)
	} else if v.busy.ran {
		p99 := percentile(v.busy.latencies, 99)
		fmt.Printf("| 1000 × 50 busy fleet: summary → status p99 ≤ 2 s, hub apiserver ≤ 0.5 cores | p99 %.2fs, %.2f cores%s | %s |\n",
			p99, v.busy.cores[partHubAPIServer], scale, verdict(len(v.busy.latencies) > 0 && v.busy.notReached == 0 && p99 <= 2 && v.busy.cores[partHubAPIServer] <= 0.5))
	}
	pc := b.perCluster(v)
	if pc.goroutinesOK {
		fmt.Printf("| 1000 × 50: ≤ 20 goroutines per idle cluster | %.1f%s | %s |\n", pc.goroutines, scale, verdict(pc.goroutines <= 20))
	} else {
		fmt.Printf("| 1000 × 50: ≤ 20 goroutines per idle cluster | n/a: go_goroutines not exported | not measured |\n")
	}
	fmt.Printf("| 1000 × 50: ≤ 2 watches per idle cluster | %.2f%s | %s |\n", pc.watches, scale, verdict(pc.watches <= 2))
}

func goroutines(s hubState) string {
	return orNA(s.goroutines, s.goroutinesOK, "%.0f")
}

func orNA(v float64, ok bool, format string) string {
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

func kib(bytes float64) string {
	if math.IsNaN(bytes) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f KiB", bytes/1024)
}

func maxOf(sorted []float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[len(sorted)-1]
}

// latencyLine prints sorted latencies' p50, p99 and max, and how many never arrived.
func latencyLine(sorted []float64, notReached int) string {
	n := len(sorted)
	if n == 0 {
		return fmt.Sprintf("none arrived (%d not reached)", notReached)
	}
	out := fmt.Sprintf("p50 %.2fs, p99 %.2fs, max %.2fs (%d)", percentile(sorted, 50), percentile(sorted, 99), sorted[n-1], n)
	if notReached > 0 {
		out += fmt.Sprintf("; %d never", notReached)
	}
	return out
}

// coresLine prints each part's cores and, in brackets, how far above the settled hub's they are.
func coresLine(cores, settled map[string]float64) string {
	var out []string
	for _, p := range parts {
		out = append(out, fmt.Sprintf("%s %.3f (%+.3f)", p, cores[p], cores[p]-settled[p]))
	}
	return strings.Join(out, ", ")
}

func cpuLine(cpu map[string]float64) string {
	var out []string
	for _, p := range parts {
		out = append(out, fmt.Sprintf("%s %.1f", p, cpu[p]))
	}
	return strings.Join(out, ", ")
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// writesLine prints request counts by resource, largest first, with their total.
func writesLine(w map[string]float64) string {
	if w == nil {
		return "not measured"
	}
	keys := slices.Collect(maps.Keys(w))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(w[b], w[a]) })
	total := 0.0
	var out []string
	for _, k := range keys {
		total += w[k]
		out = append(out, fmt.Sprintf("%s %.0f", k, w[k]))
	}
	return fmt.Sprintf("%.0f (%s)", total, strings.Join(out, ", "))
}

// printSets prints the sets scenario: the same policies as FleetPolicies and as one PolicySet,
// side by side, then the set's new version.
func (b *bench) printSets() {
	s := b.sets
	if s == nil || s.fp == nil {
		return
	}
	o := b.o
	fp, set := s.fp, s.set
	if set == nil {
		set = &result{} // the PolicySet's half never started: its column stays empty
	}
	fmt.Printf("\nPolicySet vs FleetPolicies: the same %d ClusterPolicies (-set-members) on %d cluster names, as %d FleetPolicies, then as 1 PolicySet reading them from a policy library ConfigMap (each on a hub of its own, started fresh):\n\n",
		s.members, fp.clusters, len(fp.fps))
	fmt.Printf("| measure | %d FleetPolicies | 1 PolicySet of %d members |\n", len(fp.fps), s.members)
	fmt.Println("|---|---|---|")
	conv := func(r *result, what string) string {
		if r.start.IsZero() {
			return "not measured"
		}
		out := fmtDur(r.converge, r.converged, o.timeout)
		if !r.converged {
			out += fmt.Sprintf(" (%d %s)", r.missing, what)
		}
		return out
	}
	setConv := conv(set, "clusters not synced at the set's digest")
	if !set.start.IsZero() && !set.converged && !s.setWait.ready {
		setConv += "; the set not Ready with every cluster synced"
	}
	fmt.Printf("| converge: every cluster Synced in every FleetPolicy / the set Ready, every cluster synced at its source digest (from the first FleetPolicy / the set created) | %s | %s |\n",
		conv(fp, "cluster entries not Synced"), setConv)
	fmt.Printf("| hub RSS, settled | %s | %s |\n", orEmpty(fp.state.rss > 0, mib(fp.state.rss)), orEmpty(set.state.rss > 0, mib(set.state.rss)))
	fmt.Printf("| hub goroutines, settled | %s | %s |\n", goroutines(fp.state), goroutines(set.state))
	cpu := func(r *result, part string) string { return orEmpty(r.cpu != nil, fmt.Sprintf("%.1f", r.cpu[part])) }
	fmt.Printf("| hub CPU seconds while converging | %s | %s |\n", cpu(fp, partHub), cpu(set, partHub))
	fmt.Printf("| hub kube-apiserver CPU seconds while converging | %s | %s |\n", cpu(fp, partHubAPIServer), cpu(set, partHubAPIServer))
	fmt.Printf("| mutating requests to the hub's apiserver while converging | %s | %s |\n", writesLine(fp.hubWrites), writesLine(set.hubWrites))
	fmt.Printf("| declarations' .status (JSON) | %s | %s |\n", sizeLine(s.fpStatus, "statuses"), sizeLine(s.setStatus, "status"))
	fmt.Printf("| their ClusterStatusSlices (JSON without managedFields) | %s | %s |\n", sizeLine(s.fpSlices, "slices"), sizeLine(s.setSlices, "slices"))
	both := func(status, sl sizeTotal) string {
		return orEmpty(status.objects > 0, kib(status.bytes+sl.bytes))
	}
	fmt.Printf("| status + slices | %s | %s |\n", both(s.fpStatus, s.fpSlices), both(s.setStatus, s.setSlices))
	fmt.Printf("| cluster entries at the end, by phase | %s | %s |\n", orEmpty(fp.phases != "", fp.phases), orEmpty(set.phases != "", set.phases))
	if s.prune.ran {
		prune := fmtDur(s.prune.took, s.prune.ok, o.timeout)
		if !s.prune.ok {
			prune += fmt.Sprintf(" (%d FleetPolicies left)", s.prune.left)
		}
		fmt.Printf("| the %d FleetPolicies deleted: every one gone, its policy pruned from every cluster (before the set) | %s | |\n", len(fp.fps), prune)
	}

	c := s.change
	if !c.ran {
		fmt.Println("\nThe set's new version: not measured (the first version did not converge).")
		return
	}
	n := float64(set.clusters)
	fmt.Printf("\nThe set's new version: member %s of %d changed in the library ConfigMap:\n\n", c.member, s.members)
	fmt.Println("| measure | value |")
	fmt.Println("|---|---|")
	took := fmtDur(c.took, c.wait.ok, o.timeout)
	if !c.wait.ok {
		took += " (" + c.wait.String() + ")"
	}
	fmt.Printf("| every cluster synced at the new digest, and the set Ready (from the ConfigMap written) | %s (%s → %s) |\n", took, shortDigest(s.setWait.digest), shortDigest(c.wait.digest))
	if c.opsOK {
		most := fmt.Sprintf("at most %.0f in one cluster", c.ops.maxWrites)
		if c.ops.maxCluster != "" {
			most += " (" + c.ops.maxCluster + ")"
		}
		fmt.Printf("| objects the hub wrote to the clusters (policyhub_sync_operations_total created + updated + deleted) | %.0f: %.2f per cluster, %s |\n",
			c.ops.writes(), c.ops.writes()/n, most)
		fmt.Printf("| the hub's sync operations, by action | %s |\n", c.ops)
		fmt.Printf("| clusters synced / whose only write was one object updated | %d / %d of %d |\n", c.ops.clusters, c.ops.oneUpdate, set.clusters)
	} else {
		fmt.Println("| objects the hub wrote to the clusters | n/a: policyhub_sync_operations_total not exported |")
	}
	fmt.Printf("| mutating requests the %d managed apiservers served (the %d names share them: a name whose apiserver already holds the new member, written for another name, counts it unchanged above) | %s |\n",
		len(b.f.Managed), set.clusters, writesLine(c.managedWrites))
	fmt.Printf("| CPU seconds (until the hub settled after) | %s |\n", cpuLine(c.cpu))
	fmt.Printf("| mutating requests to the hub's apiserver (the ConfigMap update included) | %s |\n", writesLine(c.hubWrites))
}

// sizeLine prints a count of objects and their bytes.
func sizeLine(s sizeTotal, what string) string {
	if s.objects == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%d %s, %s", s.objects, what, kib(s.bytes))
}

// orEmpty is v when ok, else "not measured".
func orEmpty(ok bool, v string) string {
	if !ok {
		return "not measured"
	}
	return v
}
