package main

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/policyhub/policyhub/e2e/bench/procstat"
)

// pacedCounts are what pacedWrites did.
type pacedCounts struct {
	// made writes, of which failed failed; skipped: a cluster's turn came while its last write
	// was still on its way.
	made, failed, skipped int
}

// pacedWrites writes for every cluster once a period, the clusters spread evenly over it, from
// start until end, as agents do: one write in flight per cluster, a turn that comes while the
// cluster's last write is still on its way skipped (an agent pushes its latest when it can), so a
// slow hub sees fewer writes, not a growing queue. write gets the cluster's index and the round.
func pacedWrites(start, end time.Time, period time.Duration, clusters int, write func(ci, round int) error) pacedCounts {
	spacing := time.Duration(float64(period) / float64(clusters))
	inFlight := make([]atomic.Bool, clusters)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var c pacedCounts
	for k := 0; ; k++ {
		for ci := range clusters {
			at := start.Add(time.Duration(k)*period + time.Duration(ci)*spacing)
			if !at.Before(end) {
				wg.Wait()
				return c
			}
			if wait := time.Until(at); wait > 0 {
				time.Sleep(wait)
			}
			if !inFlight[ci].CompareAndSwap(false, true) {
				mu.Lock()
				c.skipped++
				mu.Unlock()
				continue
			}
			mu.Lock()
			c.made++
			mu.Unlock()
			wg.Go(func() {
				defer inFlight[ci].Store(false)
				if err := write(ci, k); err != nil {
					mu.Lock()
					c.failed++
					mu.Unlock()
				}
			})
		}
	}
}

// coresBetween is each part's cores over took, from its CPU totals before and after.
func coresBetween(before, after map[string]procstat.Totals, took time.Duration) map[string]float64 {
	cores := map[string]float64{}
	for part, cpu := range cpuBetween(before, after) {
		cores[part] = cpu / took.Seconds()
	}
	return cores
}
