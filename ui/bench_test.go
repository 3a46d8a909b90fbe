package ui

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/policyhub/policyhub/ui/read"
)

// BenchmarkFleetPage is the fleet page at 1,000 clusters × 200 policies (200 FleetPolicies, whose
// 2,000 slices hold 200,000 cluster states): from the hub's state as the cache holds it to the
// page's HTML, the default page (worst first) and a filtered one. docs/benchmarks.md has the
// numbers: go test -run '^$' -bench BenchmarkFleetPage -benchmem ./ui
func BenchmarkFleetPage(b *testing.B) {
	now := time.Now()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	snap := syntheticFleet(1000, 200, now)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	src := &staticSource{snap: snap, broker: read.NewBroker()}
	server, err := New(src, Options{Guard: func(h http.Handler) http.Handler { return h }, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, url string }{
		{"1000x200/default", "/fleet"},
		{"1000x200/filtered", "/fleet?selector=env%3Dprod&severity=high&page=2"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, bc.url, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", bc.url, rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size)/1024, "KiB/page")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-state")
		})
	}
}
