package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/policyhub/policyhub/e2e/bench/procstat"
)

// replicasFleet is what the replicas scenario measured of the whole machine while the replicas
// converged on every name (or until the deadline).
type replicasFleet struct {
	phases     string             // the cluster entries by phase at the end
	cpu        map[string]float64 // CPU seconds by part over the wait
	took       time.Duration      // the wait
	rss        map[string]float64 // RSS by part at the end
	goroutines map[string]float64 // by replica
	watches    float64            // opened in the real apiservers by the replicas
	lockHeld   map[string]float64 // policyhub_sync_errors_total{reason="lock_held"}, by replica
	unreach    map[string]float64 // policyhub_sync_errors_total{reason="unreachable"}, by replica
	leasesLost map[string]int     // membership Leases lost, by replica, from its log (every run of it)
	// In the replicas' logs, the sync Lease's: writes lost to another writer's (conflict, or a
	// create racing one), writes that failed otherwise (a timeout), failed renewals.
	leaseConflicts, leaseWritesFailed, leaseRenewFailed int
	minAvailMiB                                         float64 // the least MemAvailable seen while waiting
	relay                                               string
}

// measureReplicasFleet reads the replicas' and the machine's state once the wait is over.
func (b *bench) measureReplicasFleet(ctx context.Context, procs []*hubProc, replicaNames []string, baselineWatches float64, f *replicasFleet) {
	f.goroutines, f.lockHeld, f.unreach = map[string]float64{}, map[string]float64{}, map[string]float64{}
	f.leasesLost = map[string]int{}
	for i, h := range procs {
		// Read the log first: a replica that has exited still has one.
		lt := leaseTrouble(h.logPath)
		f.leaseConflicts += lt.conflicts
		f.leaseWritesFailed += lt.writesFailed
		f.leaseRenewFailed += lt.renewFailed
		f.leasesLost[replicaNames[i]] = lt.membershipLost
		m, err := h.scrape(ctx, "go_goroutines", "policyhub_sync_errors_total")
		if err != nil {
			logf("replicas: %s /metrics: %v", replicaNames[i], err)
			continue
		}
		f.goroutines[replicaNames[i]], _ = m.sum("go_goroutines", nil)
		f.lockHeld[replicaNames[i]], _ = m.sum("policyhub_sync_errors_total", map[string]string{"reason": "lock_held"})
		f.unreach[replicaNames[i]], _ = m.sum("policyhub_sync_errors_total", map[string]string{"reason": "unreachable"})
	}
	if w, err := b.openWatches(ctx); err == nil {
		f.watches = w - baselineWatches
	}
	f.rss = map[string]float64{}
	for part, t := range b.snapshotReplicas(procs) {
		f.rss[part] = float64(t.RSS)
	}
	f.relay = b.relayLine()
}

// lockTrouble is what a hub's log says of the cluster sync Lease's trouble.
type lockTrouble struct {
	// conflicts: writes that lost to another writer's (a conflict, or a create racing one).
	conflicts int
	// writesFailed: every failed write, conflicts included (the others: timeouts).
	writesFailed int
	// renewFailed: renewals that failed (the Lease lost while working).
	renewFailed int
	// membershipLost: times the replica lost its membership Lease (and exited).
	membershipLost int
}

// leaseTrouble counts the lines of a hub's log where client-go's leader election met trouble
// with the cluster sync Lease.
func leaseTrouble(path string) (t lockTrouble) {
	f, err := os.Open(path)
	if err != nil {
		return t
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		line := s.Text()
		if strings.Contains(line, "this replica lost its Lease") { // hub/shard's Sharder.Start
			t.membershipLost++
			continue
		}
		if !strings.Contains(line, "policyhub-system/policyhub-sync") {
			continue
		}
		switch {
		case strings.Contains(line, "Failed to renew lease"):
			t.renewFailed++
		case strings.Contains(line, "Failed to update lease"), strings.Contains(line, "Failed to update lock"),
			strings.Contains(line, "Error initially creating lease lock"):
			t.writesFailed++
			if strings.Contains(line, "Operation cannot be fulfilled") || strings.Contains(line, "already exists") {
				t.conflicts++
			}
		}
	}
	return t
}

// memAvailableMiB reads the machine's MemAvailable (0 when unknown).
func memAvailableMiB() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// progress logs, every minute until stopped, the cluster entries by phase, the hubs' RSS and
// the machine's available memory (a 10,000-name run is long: this is how far it got so far),
// and remembers the least available memory seen in f.
func (b *bench) progress(scenario string, t *tracker, procs func() []*hubProc, f *replicasFleet) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	f.minAvailMiB = memAvailableMiB()
	go func() {
		defer close(finished)
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			avail := memAvailableMiB()
			f.minAvailMiB = min(f.minAvailMiB, avail)
			if n++; n%4 != 0 {
				continue
			}
			var pids []int
			for _, h := range procs() {
				pids = append(pids, h.pid)
			}
			rss := procstat.Sum([]procstat.Group{{Name: "r", PIDs: pids}})["r"].RSS
			logf("%s: after %s: %s; hubs' RSS %s in all; %.0f MiB available", scenario, time.Since(start).Round(time.Second), t.phases(), mib(float64(rss)), avail)
		}
	}()
	return func() { close(done); <-finished }
}

// snapshotReplicas reads the CPU seconds and RSS of every part, the replicas together as the hub.
func (b *bench) snapshotReplicas(procs []*hubProc) map[string]procstat.Totals {
	out := b.snapshot(nil)
	var pids []int
	for _, h := range procs {
		pids = append(pids, h.pid)
	}
	out[partHub] = procstat.Sum([]procstat.Group{{Name: partHub, PIDs: pids}})[partHub]
	return out
}

// printReplicasFleet prints the rows of the machine while the replicas converged on every name.
func printReplicasFleet(f *replicasFleet, replicas []string) {
	if f == nil {
		return
	}
	perReplica := func(m map[string]float64) string {
		out := ""
		for _, n := range replicas {
			out += fmt.Sprintf("%s %.0f; ", n, m[n])
		}
		return out
	}
	fmt.Printf("| cluster entries by phase at the end | – | %s |\n", f.phases)
	fmt.Printf("| goroutines per replica | – | %s|\n", perReplica(f.goroutines))
	fmt.Printf("| watches the replicas opened in the real apiservers | – | %.0f |\n", f.watches)
	fmt.Printf("| passes ended LockHeld (policyhub_sync_errors_total) | – | %s|\n", perReplica(f.lockHeld))
	fmt.Printf("| passes ended unreachable | – | %s|\n", perReplica(f.unreach))
	fmt.Printf("| membership Leases lost (in the replicas' logs) | – | %s|\n", perReplicaInt(f.leasesLost, replicas))
	fmt.Printf("| sync Lease conflicts / failed writes (conflicts and timeouts) / failed renewals in the replicas' logs | – | %d / %d / %d |\n", f.leaseConflicts, f.leaseWritesFailed, f.leaseRenewFailed)
	secs := f.took.Seconds()
	cores := ""
	for _, p := range parts {
		cores += fmt.Sprintf("%s %.2f; ", p, f.cpu[p]/secs)
	}
	fmt.Printf("| cores while converging (%s; 2 in all) | – | %s|\n", f.took.Round(time.Second), cores)
	rss := ""
	for _, p := range parts {
		rss += fmt.Sprintf("%s %s; ", p, mib(f.rss[p]))
	}
	fmt.Printf("| RSS at the end | – | %s|\n", rss)
	fmt.Printf("| least memory available while converging | – | %.0f MiB |\n", f.minAvailMiB)
	if f.relay != "" {
		fmt.Printf("| relay | – | %s |\n", f.relay)
	}
}

// rssByPart is each part's RSS, for a log line.
func rssByPart(snap map[string]procstat.Totals) map[string]string {
	out := map[string]string{}
	for part, t := range snap {
		out[part] = mib(float64(t.RSS))
	}
	return out
}

func perReplicaInt(m map[string]int, replicas []string) string {
	out := ""
	for _, n := range replicas {
		out += fmt.Sprintf("%s %d; ", n, m[n])
	}
	return out
}
