package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/policyhub/policyhub/e2e/bench/benchkit"
)

// row is one shape's measurement.
type row struct {
	shape shape
	// bodyBytes is the mean size of the bodies sent; objectBytes the stored object's JSON as the
	// apiserver returns it, managedFieldsBytes the part of it that is metadata.managedFields.
	bodyBytes, objectBytes, managedFieldsBytes int
	writes                                     int
	// watchBytes is what the watches received per write.
	watchBytes float64
	took       time.Duration
	// cpuMS is each part's CPU milliseconds per write, less what it spends idle.
	cpuMS    map[string]float64
	p50, p99 time.Duration
}

// idleRates is each part's CPU (cores) over d with nothing written: every apiserver renews its
// own Leases and runs its controllers, and etcd serves them all.
func (b *bench) idleRates(d time.Duration) map[string]float64 {
	before, t0 := b.pids.snapshot(), time.Now()
	time.Sleep(d)
	after, took := b.pids.snapshot(), time.Since(t0)
	out := map[string]float64{}
	for part, a := range after {
		out[part] = (a.CPU - before[part].CPU) / took.Seconds()
	}
	return out
}

// measure writes one warm-up write per object (each object takes the shape's form: its size,
// its managedFields), then o.writes writes, o.parallel at a time, timing each and reading the
// CPU of the fleet's parts before and a second after (the apiserver's watch fan-out of the last
// writes lands after their responses).
func (b *bench) measure(ctx context.Context, s shape, idle map[string]float64) (row, error) {
	o := b.o
	warm := o.namespaces
	writes := make([]write, warm+o.writes)
	r := row{shape: s, writes: o.writes}
	for i := range writes {
		w, err := s.writeFor(i)
		if err != nil {
			return r, err
		}
		writes[i] = w
		if i >= warm {
			r.bodyBytes += len(w.body)
		}
	}
	r.bodyBytes /= o.writes
	if errs := benchkit.InParallel(o.parallel, warm, func(i int) error {
		_, err := writes[i].send(ctx, s.client)
		return err
	}); len(errs) > 0 {
		return r, fmt.Errorf("warm-up: %d of %d writes failed: %w", len(errs), warm, errs[0])
	}
	latencies := make([]time.Duration, o.writes)
	before, t0, watched := b.pids.snapshot(), time.Now(), b.watch.bytes()
	errs := benchkit.InParallel(o.parallel, o.writes, func(k int) error {
		if o.rate > 0 {
			time.Sleep(time.Until(t0.Add(time.Duration(float64(k) / o.rate * float64(time.Second)))))
		}
		start := time.Now()
		_, err := writes[warm+k].send(ctx, s.client)
		latencies[k] = time.Since(start)
		return err
	})
	r.took = time.Since(t0)
	time.Sleep(time.Second)
	after, window := b.pids.snapshot(), time.Since(t0)
	r.watchBytes = float64(b.watch.bytes()-watched) / float64(o.writes)
	if len(errs) > 0 {
		return r, fmt.Errorf("%d of %d writes failed: %w", len(errs), o.writes, errs[0])
	}
	if err := b.watch.ended(); err != nil {
		return r, err
	}
	r.cpuMS = map[string]float64{}
	for part, a := range after {
		busy := a.CPU - before[part].CPU - idle[part]*window.Seconds()
		r.cpuMS[part] = busy * 1000 / float64(o.writes)
	}
	slices.Sort(latencies)
	r.p50, r.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	var err error
	r.objectBytes, r.managedFieldsBytes, err = b.objectSize(ctx, s)
	return r, err
}

// objectSize reads the first namespace's object of the shape and measures its JSON and the
// managedFields in it.
func (b *bench) objectSize(ctx context.Context, s shape) (total, managedFields int, err error) {
	raw, err := s.client.Get().AbsPath(s.objectPath(namespace(0))).Do(ctx).Raw()
	if err != nil {
		return 0, 0, fmt.Errorf("read the stored object: %w", err)
	}
	var obj struct {
		Metadata struct {
			ManagedFields json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return 0, 0, fmt.Errorf("decode the stored object: %w", err)
	}
	return len(raw), len(obj.Metadata.ManagedFields), nil
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func printTable(o options, commit string, idle map[string]float64, rows []row) {
	fmt.Printf("\n%s; commit %s; %d cores; %d writes per shape over %d namespaces, %d in flight, after %d warm-up writes; summaries of %d policies, %d violations; %d watch(es) on each written collection of the hub; %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), commit, cores(), o.writes, o.namespaces, o.parallel, o.namespaces, o.policies, o.violations, o.watchers, pace(o.rate))
	fmt.Printf("idle (subtracted below): hub kube-apiserver %.3f cores, etcd %.3f, gateway and managed kube-apiserver %.3f\n\n",
		idle[partHubAPIServer], idle[partEtcd], idle[partOthers])
	fmt.Println("| shape | body bytes | stored object bytes (managedFields) | writes/s | hub kube-apiserver CPU-ms/write | hub apiserver cores at 100 writes/s | etcd CPU-ms/write | gateway + managed apiserver CPU-ms/write | p50 | p99 | watch bytes/write |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		api := r.cpuMS[partHubAPIServer]
		fmt.Printf("| %s. %s | %d | %d (%d) | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %s | %.0f |\n",
			r.shape.letter, r.shape.name, r.bodyBytes, r.objectBytes, r.managedFieldsBytes,
			float64(r.writes)/r.took.Seconds(), api, api*100/1000, r.cpuMS[partEtcd], r.cpuMS[partOthers],
			fmtLatency(r.p50), fmtLatency(r.p99), r.watchBytes)
	}
	fmt.Println()
	fmt.Println(strings.TrimSpace(`
CPU: /proc's user+system time of each process over the writes and one second after, less its idle
rate over the same window, divided by the writes. etcd serves every apiserver of the fleet; in
shape h the managed apiserver stores the ConfigMap in it too (and no watch of the hub sees it).`))
}

func fmtLatency(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func pace(rate float64) string {
	if rate == 0 {
		return "writes back to back (-rate 0)"
	}
	return fmt.Sprintf("writes paced at %g/s (-rate)", rate)
}
