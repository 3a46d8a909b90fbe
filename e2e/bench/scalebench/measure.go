package main

import (
	"context"
	"fmt"
	"time"

	"github.com/policyhub/policyhub/e2e/bench/procstat"
)

// settle waits until the hub's CPU stays under 0.1 core for 3 s in a row, for at most maxWait,
// sampling every second. It returns when the quiet stretch began and the snapshot then.
func (b *bench) settle(h *hubProc, maxWait time.Duration) (at time.Time, snap map[string]procstat.Totals, ok bool, residue float64) {
	const window, quiet, idle = time.Second, 3, 0.1
	deadline := time.Now().Add(maxWait)
	type point struct {
		t    time.Time
		snap map[string]procstat.Totals
	}
	points := []point{{time.Now(), b.snapshot(h)}}
	for {
		time.Sleep(window)
		points = append(points, point{time.Now(), b.snapshot(h)})
		n := len(points)
		if n > quiet {
			calm := true
			for i := n - quiet; i < n; i++ {
				cores := (points[i].snap[partHub].CPU - points[i-1].snap[partHub].CPU) / points[i].t.Sub(points[i-1].t).Seconds()
				if cores >= idle {
					calm = false
				}
			}
			if calm {
				p := points[n-quiet-1]
				return p.t, p.snap, true, 0
			}
		}
		if time.Now().After(deadline) || h.exitError() != nil {
			last, first := points[n-1], points[max(n-quiet-1, 0)]
			residue = (last.snap[partHub].CPU - first.snap[partHub].CPU) / last.t.Sub(first.t).Seconds()
			return last.t, last.snap, false, residue
		}
	}
}

// measureState waits for the hub to settle (at most maxSettle) and measures a hubState.
func (b *bench) measureState(ctx context.Context, h *hubProc, baselineWatches float64, maxSettle time.Duration) (hubState, error) {
	var s hubState
	start := time.Now()
	_, _, s.settled, s.settleResidue = b.settle(h, maxSettle)
	s.settleTook = time.Since(start)
	m, err := h.scrape(ctx, "go_goroutines", "process_resident_memory_bytes")
	if err != nil {
		return s, fmt.Errorf("hub /metrics: %w", err)
	}
	s.goroutines, s.goroutinesOK = m.sum("go_goroutines", nil)
	if rss, ok := m.sum("process_resident_memory_bytes", nil); ok {
		s.rss, s.rssFrom = rss, "/metrics"
	} else {
		st, err := procstat.Read(h.pid)
		if err != nil {
			return s, err
		}
		s.rss, s.rssFrom = float64(st.RSS), "/proc"
	}
	if s.watches, err = b.openWatches(ctx); err != nil {
		return s, err
	}
	s.watches -= baselineWatches
	before := b.snapshot(h)
	t0 := time.Now()
	time.Sleep(10 * time.Second)
	after := b.snapshot(h)
	s.idleCores = coresBetween(before, after, time.Since(t0))
	s.gatewayRSS = float64(after[partGateway].RSS)
	s.hubAPIRSS = float64(after[partHubAPIServer].RSS)
	return s, nil
}

// openWatches sums the WATCH requests open in every managed kube-apiserver
// (apiserver_longrunning_requests{verb="WATCH"}).
func (b *bench) openWatches(ctx context.Context) (float64, error) {
	total := 0.0
	for _, c := range b.f.Managed {
		m, err := scrapeAPIServer(ctx, c.Config, "apiserver_longrunning_requests")
		if err != nil {
			return 0, fmt.Errorf("%s /metrics: %w", c.Name, err)
		}
		v, found := m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
		if !found {
			return 0, fmt.Errorf("%s serves no apiserver_longrunning_requests", c.Name)
		}
		total += v
	}
	return total, nil
}

// hubWrites counts the mutating requests the hub's kube-apiserver has served, by resource
// (resource/subresource), from its apiserver_request_total: the hub's status writes and Events,
// and this benchmark's own writes (FleetPolicies, annotations, summaries).
func (b *bench) hubWrites(ctx context.Context) map[string]float64 {
	m, err := scrapeAPIServer(ctx, b.f.Hub.Config, "apiserver_request_total")
	if err != nil {
		logf("hub kube-apiserver /metrics: %v", err)
		return nil
	}
	out := map[string]float64{}
	addWrites(out, m)
	return out
}

// addWrites adds the mutating requests of an apiserver_request_total reading to out, by
// resource (resource/subresource); dry runs wrote nothing and are left out.
func addWrites(out map[string]float64, m metricSet) {
	for _, s := range m {
		if s.name != "apiserver_request_total" {
			continue
		}
		switch s.labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			continue
		}
		if s.labels["dry_run"] != "" {
			continue
		}
		key := s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += s.value
	}
}

// writesBetween is hubWrites' growth between two readings.
func writesBetween(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// managedRequests sums apiserver_request_total over the managed kube-apiservers.
func (b *bench) managedRequests(ctx context.Context) (float64, error) {
	total := 0.0
	for _, c := range b.f.Managed {
		m, err := scrapeAPIServer(ctx, c.Config, "apiserver_request_total")
		if err != nil {
			return 0, fmt.Errorf("%s /metrics: %w", c.Name, err)
		}
		v, _ := m.sum("apiserver_request_total", nil)
		total += v
	}
	return total, nil
}
