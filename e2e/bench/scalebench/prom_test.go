package main

import (
	"math"
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	page := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 171
apiserver_longrunning_requests{component="apiserver",group="kyverno.io",resource="clusterpolicies",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="CONNECT",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="cluster",subresource="",verb="WATCH",version="v1"} 2 1700000000000
policyhub_policy_results{cluster="vc-0001",policy="a \"quoted\", {braced} one",result="fail"} 4
process_resident_memory_bytes 3.5651584e+07
`
	m, err := parseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.sum("go_goroutines", nil); !ok || v != 171 {
		t.Errorf("go_goroutines = %v, %v", v, ok)
	}
	if v, _ := m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"}); v != 5 {
		t.Errorf("WATCH requests = %v, want 5", v)
	}
	if v, _ := m.sum("process_resident_memory_bytes", nil); v != 35651584 {
		t.Errorf("RSS = %v", v)
	}
	if _, ok := m.sum("absent", nil); ok {
		t.Errorf("absent metric found")
	}
	if got := m.labelValues("policyhub_policy_results", "policy"); !got[`a "quoted", {braced} one`] {
		t.Errorf("label values = %v", got)
	}

	only, err := parseMetrics(strings.NewReader(page), "go_goroutines")
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 1 || only[0].name != "go_goroutines" {
		t.Errorf("parse with names kept %v", only)
	}
}

func TestPercentile(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := percentile(sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Errorf("percentile of nothing is a number")
	}
}
