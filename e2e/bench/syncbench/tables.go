package main

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"time"
)

// row is one method's runs: [0] converging, [1] the no-op resync.
type row struct {
	name, prefix string
	objects      int
	runs         [][2]cost
}

// median is the run with the median convergence time (the lower middle of an even count): a
// whole run, so its columns stay consistent with each other.
func (r row) median() [2]cost {
	runs := slices.Clone(r.runs)
	slices.SortFunc(runs, func(a, b [2]cost) int { return int(a[0].duration - b[0].duration) })
	return runs[(len(runs)-1)/2]
}

func printTables(o options, rows []row) {
	fmt.Printf("\n%d managed clusters × %d policies = %d objects; parallelism %d; Kyverno %v; rounds %d (each row: the run of median convergence)\n\n",
		o.clusters, o.policies, o.clusters*o.policies, o.parallel, o.kyverno, max(o.count, 1))
	fmt.Println("| method | converge | objects/s | requests | writes | no-op resync: time | requests | writes | objects changed | sync Leases written |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		m := r.median()
		apply, noop := m[0], m[1]
		fmt.Printf("| %s | %s | %.0f | %.0f | %.0f | %s | %.0f | %.0f | %d | %d |\n", r.name,
			apply.duration.Round(10*time.Millisecond), float64(r.objects)/apply.duration.Seconds(), apply.requests, apply.writes,
			noop.duration.Round(10*time.Millisecond), noop.requests, noop.writes, noop.changed, noop.leases)
	}
	fmt.Printf("\nCPU seconds spent while converging (the machine has %d cores):\n\n", goruntime.NumCPU())
	parts := []string{"managed kube-apiservers", "hub kube-apiserver", "cluster-gateway", "etcd", "syncbench (hub controller, clients)", "kubectl"}
	fmt.Println("| method | " + strings.Join(parts, " | ") + " | total |")
	fmt.Println("|---|" + strings.Repeat("---|", len(parts)+1))
	for _, r := range rows {
		m := r.median()[0]
		line := "| " + r.name + " |"
		for _, p := range parts {
			line += fmt.Sprintf(" %.1f |", m.cpu[p])
		}
		fmt.Printf("%s %.1f |\n", line, m.cpuTotal())
	}
	if len(rows[0].runs) > 1 {
		fmt.Println("\nEvery round (convergence, CPU seconds in all):")
		for i := range rows[0].runs {
			line := fmt.Sprintf("round %d:", i+1)
			for _, r := range rows {
				line += fmt.Sprintf(" %s %s (%.1f CPU-s);", r.prefix, r.runs[i][0].duration.Round(10*time.Millisecond), r.runs[i][0].cpuTotal())
			}
			fmt.Println(strings.TrimSuffix(line, ";"))
		}
	}
	byPrefix := map[string]row{}
	for _, r := range rows {
		byPrefix[r.prefix] = r
	}
	if hub, ok := byPrefix["policyhub"]; ok {
		for _, floor := range []string{"floor", "floor-watched"} {
			if f, ok := byPrefix[floor]; ok {
				fmt.Printf("policyhub at the median: %.2f× the %s\n", hub.median()[0].duration.Seconds()/f.median()[0].duration.Seconds(), floor)
			}
		}
	}
	plain, ceiling, kubectl := byPrefix["plain"], byPrefix["ceiling"], byPrefix["kubectl"]
	if ceiling.runs == nil || kubectl.runs == nil {
		return
	}
	ratios := func(i int, hub time.Duration) string {
		at := func(r row) time.Duration {
			if i < 0 {
				return r.median()[0].duration
			}
			return r.runs[i][0].duration
		}
		s := fmt.Sprintf("%.1f× faster than the kubectl loop; %.0f%% of the ceiling's throughput",
			at(kubectl).Seconds()/hub.Seconds(), 100*at(ceiling).Seconds()/hub.Seconds())
		if plain.runs != nil {
			s += fmt.Sprintf(" (%.0f%% of the plain policies' loop)", 100*at(plain).Seconds()/hub.Seconds())
		}
		return s
	}
	for _, name := range []string{"policyhub", "floor", "floor-watched"} {
		r, ok := byPrefix[name]
		if !ok {
			continue
		}
		fmt.Println()
		if len(r.runs) > 1 {
			for i, run := range r.runs {
				fmt.Printf("round %d: %s %s\n", i+1, name, ratios(i, run[0].duration))
			}
		}
		changed := 0
		for _, run := range r.runs {
			changed = max(changed, run[1].changed)
		}
		fmt.Printf("medians: %s %s; at most %d objects changed by its no-op resyncs\n", name, ratios(-1, r.median()[0].duration), changed)
	}
}
