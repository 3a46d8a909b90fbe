// Command inventorybench measures what the fleet inventory of Kyverno legacy objects costs the
// hub per cluster: the bytes it adds to a cluster's summary, the hub memory of a thousand such
// summaries (the summary cache, and the metrics' copy), the metric series and the scrape, and the
// CLI's and the web view's work over them. It runs in process, on summaries as the hub's cache
// decodes them from the apiserver's JSON; the inventory costs the managed clusters no request from
// the hub (agents push it inside their summaries; every reader reads the hub). `make bench-inventory`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/ui"
	"github.com/policyhub/policyhub/ui/pages"
	"github.com/policyhub/policyhub/ui/read"
)

func main() {
	clusters := flag.Int("clusters", 1000, "clusters in the fleet")
	objects := flag.Int("objects", 200, "unowned legacy objects per cluster")
	policies := flag.Int("policies", 20, "policies each summary reports besides the inventory")
	flag.Parse()
	if err := run(*clusters, *objects, *policies); err != nil {
		fmt.Fprintln(os.Stderr, "inventorybench:", err)
		os.Exit(1)
	}
}

// measure is one fleet's cost: with or without the inventory.
type measure struct {
	summaryBytes           int
	cacheHeap, metricsHeap uint64
	series, scrapeBytes    int
	cliTime                time.Duration
	cliBytes               int
	pageTime               time.Duration
	pageBytes              int
}

func run(clusters, objects, policies int) error {
	without, err := fleet(clusters, objects, policies, false)
	if err != nil {
		return err
	}
	with, err := fleet(clusters, objects, policies, true)
	if err != nil {
		return err
	}
	kib := func(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	perCluster := func(a, b uint64) string {
		return fmt.Sprintf("%.1f KiB", (float64(b)-float64(a))/float64(clusters)/1024)
	}
	fmt.Printf("\n`go run ./e2e/bench/inventorybench -clusters %d -objects %d -policies %d`: %d clusters, each summary reporting %d policies; "+
		"with the inventory, each cluster also holds %d legacy objects not owned by policyhub (%d ClusterPolicies, %d Policies; %d of them named) and its Kyverno's facts.\n\n",
		clusters, objects, policies, clusters, policies, objects, objects*3/4, objects-objects*3/4, policyhubv1.MaxLegacyNames)
	fmt.Println("| at " + fmt.Sprint(clusters) + " clusters | without inventory | with inventory | the inventory, per cluster |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| summary (JSON, one cluster) | %d bytes | %d bytes | %d bytes |\n", without.summaryBytes, with.summaryBytes, with.summaryBytes-without.summaryBytes)
	fmt.Printf("| hub summary cache (decoded summaries) | %s | %s | %s |\n", mib(without.cacheHeap), mib(with.cacheHeap), perCluster(without.cacheHeap, with.cacheHeap))
	fmt.Printf("| hub metrics' copy of the summaries | %s | %s | %s |\n", mib(without.metricsHeap), mib(with.metricsHeap), perCluster(without.metricsHeap, with.metricsHeap))
	fmt.Printf("| metric series (policyhub_*) | %d | %d | %.0f |\n", without.series, with.series, float64(with.series-without.series)/float64(clusters))
	fmt.Printf("| scrape (text format) | %s | %s | %.0f bytes |\n", kib(float64(without.scrapeBytes)), kib(float64(with.scrapeBytes)), float64(with.scrapeBytes-without.scrapeBytes)/float64(clusters))
	fmt.Printf("| the fleet's inventory computed from the summaries (pages.BuildInventory, what `kubectl policyhub inventory` and the view compute), as JSON | — | %s, %s of JSON | — |\n", with.cliTime.Round(time.Millisecond), kib(float64(with.cliBytes)))
	fmt.Printf("| web view `/inventory` (one page of 50 clusters) | — | %s, %s of HTML | — |\n", with.pageTime.Round(time.Millisecond), kib(float64(with.pageBytes)))
	fmt.Println("| requests the hub sends the managed clusters for the inventory | 0 | 0 | 0 (agents push it in their summaries) |")
	return nil
}

// fleet builds clusters' summaries as the hub's cache holds them and measures them.
func fleet(clusters, objects, policies int, inventory bool) (*measure, error) {
	m := &measure{}
	now := time.Now()
	raw := make([][]byte, clusters)
	for i := range clusters {
		data, err := json.Marshal(summary(fmt.Sprintf("cluster-%04d", i), objects, policies, inventory, now))
		if err != nil {
			return nil, err
		}
		raw[i] = data
	}
	m.summaryBytes = len(raw[0])

	// The cache: the summaries decoded from the apiserver's JSON, as an informer holds them.
	held, err := benchkit.HoldSummaries(raw, now)
	if err != nil {
		return nil, err
	}
	cached, families := held.Cached, held.Families
	m.cacheHeap, m.metricsHeap, m.series = held.CacheHeap, held.MetricsHeap, held.Series
	var scrape countingWriter
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&scrape, f); err != nil {
			return nil, err
		}
	}
	m.scrapeBytes = int(scrape)
	if !inventory {
		return m, nil
	}

	// The CLI's report: the inventory computed from every summary, as JSON.
	list := make([]*policyhubv1.PolicyReportSummary, len(cached))
	names := map[string]map[string]string{}
	for i := range cached {
		list[i] = &cached[i]
		names[cached[i].Namespace] = map[string]string{"env": "prod"}
	}
	start := time.Now()
	inv := pages.BuildInventory(list, names, nil, func(*policyhubv1.PolicyReportSummary) bool { return false })
	data, err := json.Marshal(inv)
	if err != nil {
		return nil, err
	}
	m.cliTime, m.cliBytes = time.Since(start), len(data)

	// The web view's page, through its server.
	snap := &read.Snapshot{Now: now, Summaries: cached, Clusters: names}
	server, err := ui.New(staticSource{snap}, ui.Options{Guard: func(h http.Handler) http.Handler { return h }, Now: func() time.Time { return now }, Log: logr.Discard()})
	if err != nil {
		return nil, err
	}
	start = time.Now()
	rec := httptest.NewRecorder()
	server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, pages.InventoryURL, nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", pages.InventoryURL, rec.Code)
	}
	m.pageTime, m.pageBytes = time.Since(start), rec.Body.Len()
	runtime.KeepAlive(cached)
	return m, nil
}

// summary is one cluster's summary: policies results, and with the inventory its Kyverno's facts
// and objects legacy objects not owned by policyhub.
func summary(cluster string, objects, policies int, inventory bool, now time.Time) *policyhubv1.PolicyReportSummary {
	s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName, Generation: 1}}
	s.Spec.Cluster, s.Spec.GeneratedAt = cluster, &metav1.Time{Time: now}
	s.Status.ObservedGeneration, s.Status.ObservedTime = 1, &metav1.MicroTime{Time: now}
	s.Spec.Engine.ReportAPIs = []string{"wgpolicyk8s.io/v1alpha2"}
	s.Spec.Engine.KyvernoWebhooks = true
	for p := range policies {
		r := policyhubv1.ResultCounts{Pass: 40, Fail: int64(p % 3)}
		s.Spec.Policies = append(s.Spec.Policies, policyhubv1.PolicySummary{Name: fmt.Sprintf("policy-%03d", p), Kind: "ValidatingPolicy",
			Severity: "medium", Category: "Best Practices", Results: r})
		s.Spec.Totals.Pass += r.Pass
		s.Spec.Totals.Fail += r.Fail
	}
	if !inventory {
		return s
	}
	s.Spec.Engine.PolicyAPIs = []string{"kyverno.io/v1", "kyverno.io/v2", "policies.kyverno.io/v1"}
	on := true
	s.Spec.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: "v1.19.1", VersionSource: "image tag of Deployment kyverno/kyverno-admission-controller",
		PolicyExceptions: &on, ExceptionNamespace: "kyverno-exceptions"}
	clusterPolicies := objects * 3 / 4
	inv := &policyhubv1.LegacyInventory{Counts: []policyhubv1.LegacyCount{
		{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: int64(clusterPolicies)},
		{Kind: "Policy", Owner: policyhubv1.LegacyOwnerOther, Count: int64(objects - clusterPolicies)},
	}}
	for i := range min(objects, policyhubv1.MaxLegacyNames) {
		obj := policyhubv1.LegacyObject{Kind: "ClusterPolicy", Name: fmt.Sprintf("platform-team-require-labels-%04d", i), Owner: policyhubv1.LegacyOwnerOther}
		inv.Objects = append(inv.Objects, obj)
	}
	s.Spec.Engine.Legacy = inv
	return s
}

type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// staticSource serves the view from one snapshot.
type staticSource struct{ snap *read.Snapshot }

func (s staticSource) Snapshot(context.Context, time.Time) (*read.Snapshot, error) {
	return s.snap, nil
}
func (s staticSource) Summary(_ context.Context, cluster string) (*policyhubv1.PolicyReportSummary, error) {
	for i := range s.snap.Summaries {
		if s.snap.Summaries[i].Namespace == cluster {
			return &s.snap.Summaries[i], nil
		}
	}
	return nil, fmt.Errorf("no summary of %s", cluster)
}
func (s staticSource) Subscribe() *read.Subscription { return read.NewBroker().Subscribe() }
