package main

import (
	"fmt"
	"slices"
	"time"
)

func printTables(o options, w *workload, m *measured) {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	sorted := slices.Clone(m.changes)
	slices.Sort(sorted)
	p50, worst := sorted[len(sorted)/2], sorted[len(sorted)-1]
	var changeCPU float64
	for _, c := range m.changeCPU {
		changeCPU += c
	}

	fmt.Printf("\n`go run ./e2e/bench/agentbench -results %d -per-report %d -namespaces %d -apps %d -push-interval %s`: "+
		"%d ConfigMaps of %d applications in %d namespaces, each with a PolicyReport of %d results (%d in all, %d failing), written in %s.\n\n",
		o.results, o.perReport, o.namespaces, o.apps, o.pushInterval, w.resources, o.apps, o.namespaces, o.perReport, w.results(), w.failures(), m.fill.Round(time.Second))

	fmt.Println("| policyhub-agent | measured |")
	fmt.Println("|---|---|")
	fmt.Printf("| start to the first complete summary on the hub (lists every report and application label) | %s, %.1f CPU-s |\n", m.first.Round(10*time.Millisecond), m.firstCPU)
	fmt.Printf("| RSS settled | %s |\n", mib(m.settleRSS))
	fmt.Printf("| RSS peak (VmHWM) | %s |\n", mib(m.peakRSS))
	fmt.Printf("| CPU idle, nothing changing | %.2f CPU-s over %s |\n", m.idleCPU, m.idleFor)
	fmt.Printf("| a report changes → the summary on the hub counts it (%d changes) | p50 %s, max %s; %.2f CPU-s each |\n",
		len(m.changes), p50.Round(time.Millisecond), worst.Round(time.Millisecond), changeCPU/float64(len(m.changeCPU)))
	fmt.Printf("| summary spec | %d bytes, %d violations kept |\n", m.summary, m.violations)

	hub := 0
	for _, n := range m.hubSeries {
		hub += n
	}
	fmt.Println("\n| metric series for these results | series |")
	fmt.Println("|---|---|")
	names := make([]string, 0, len(m.hubSeries))
	for name := range m.hubSeries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Printf("| policyhub hub: `%s` | %d |\n", name, m.hubSeries[name])
	}
	fmt.Printf("| **policyhub hub, all** | **%d** |\n", hub)
	fmt.Printf("| policy-reporter, detailed mode (one per result) | %d |\n", w.results())
	fmt.Printf("| policy-reporter, simple mode (namespace, policy, status, severity, category, source) | %d |\n", w.simpleSeries())

	fewer := float64(w.results()) / float64(max(hub, 1))
	fmt.Println("\n| target | measured | |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| agent RSS ≤ %s with %d results | peak %s | %s |\n", mib(targetRSS), w.results(), mib(m.peakRSS), verdict(m.peakRSS <= targetRSS))
	fmt.Printf("| a summary in ≤ %s | worst change %s (p50 %s) | %s |\n", targetSummary, worst.Round(time.Millisecond), p50.Round(time.Millisecond), verdict(worst <= targetSummary))
	fmt.Printf("| hub series ≥ %.0f× fewer than policy-reporter's detailed mode | %.0f× (%d vs %d) | %s |\n", targetFewer, fewer, hub, w.results(), verdict(fewer >= targetFewer))
}
