package benchkit

import (
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/metrics"
)

// SummaryCopies is what the hub holds of a fleet's summaries: the cache's decoded copies and the
// metrics' copies, measured in heap bytes, and the metric families exported from them.
type SummaryCopies struct {
	// Cached are the summaries decoded from the apiserver's JSON, as an informer holds them.
	Cached []policyhubv1.PolicyReportSummary
	// Metrics holds the metrics' copies: keep it alive while later readings of the heap run.
	Metrics                *metrics.Compliance
	CacheHeap, MetricsHeap uint64
	Families               []*dto.MetricFamily
	// Series counts the families' series.
	Series int
}

// HoldSummaries decodes raw (each summary's JSON, as the apiserver sends it) as the hub's cache
// does and hands every summary to the hub's metrics at now, measuring the heap each takes. The
// heap is read after two collections; raw stays alive across both readings, so it is never
// subtracted from the cache's count.
func HoldSummaries(raw [][]byte, now time.Time) (*SummaryCopies, error) {
	c := &SummaryCopies{}
	heap := HeapNow()
	c.Cached = make([]policyhubv1.PolicyReportSummary, len(raw))
	for i, data := range raw {
		if err := json.Unmarshal(data, &c.Cached[i]); err != nil {
			return nil, fmt.Errorf("decode summary %d: %w", i, err)
		}
	}
	c.CacheHeap = HeapNow() - heap
	runtime.KeepAlive(raw)

	heap = HeapNow()
	reg := prometheus.NewRegistry()
	compliance := metrics.NewCompliance(reg, func() time.Time { return now }, nil)
	for i := range c.Cached {
		compliance.Set(c.Cached[i].Namespace, &c.Cached[i])
	}
	c.MetricsHeap = HeapNow() - heap
	c.Metrics = compliance
	families, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather the metrics: %w", err)
	}
	c.Families = families
	for _, f := range families {
		c.Series += len(f.GetMetric())
	}
	return c, nil
}

// HeapNow is the live heap after two collections.
func HeapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
