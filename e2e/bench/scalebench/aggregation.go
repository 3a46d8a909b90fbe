package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// expectedResults are the results the summary of cluster index ci reports for FleetPolicy index j.
func expectedResults(ci, j int) policyhubv1.ResultCounts {
	return policyhubv1.ResultCounts{Pass: 10, Fail: int64(1 + (ci+j)%7)}
}

// summary is the PolicyReportSummary cluster index ci's agent would write: the results of every
// FleetPolicy's ClusterPolicy in that cluster.
func (b *bench) summary(r *result, ci int) (*unstructured.Unstructured, error) {
	cluster := r.clusterNames[ci]
	now := metav1.Now()
	spec := policyhubv1.PolicyReportSummarySpec{
		Cluster: cluster, GeneratedAt: &now,
		// Long enough that no result turns stale during the benchmark.
		HeartbeatInterval: &metav1.Duration{Duration: time.Hour},
		ContentHash:       fmt.Sprintf("bench-%d", now.UnixNano()),
		Engine:            policyhubv1.EngineInfo{ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2"}, KyvernoWebhooks: true},
	}
	for j, fp := range r.fps {
		res := expectedResults(ci, j)
		spec.Policies = append(spec.Policies, policyhubv1.PolicySummary{Name: fp, Kind: "ClusterPolicy", Severity: "medium", Category: "bench", Results: res})
		spec.Totals.Pass += res.Pass
		spec.Totals.Fail += res.Fail
	}
	return summaryObject(cluster, spec)
}

// summaryObject is the cluster's summary of spec as its agent applies it: no status, no
// creation time.
func summaryObject(cluster string, spec policyhubv1.PolicyReportSummarySpec) (*unstructured.Unstructured, error) {
	s := &policyhubv1.PolicyReportSummary{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyhubv1.GroupVersion.String(), Kind: "PolicyReportSummary"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// aggregation writes one summary per cluster name, as its agent would (server-side apply, field
// manager policyhub-agent), -summary-rate per second, and measures for each the time from its
// write until every FleetPolicy's status shows its results for that cluster.
func (b *bench) aggregation(ctx context.Context, r *result, h *hubProc, t *tracker) error {
	index := map[string]int{}
	for i, c := range r.clusterNames {
		index[c] = i
	}
	fpIndex := map[string]int{}
	for j, fp := range r.fps {
		fpIndex[fp] = j
	}
	t.setExpect(func(fp, cluster string) (policyhubv1.ResultCounts, bool) {
		ci, ok := index[cluster]
		j, ok2 := fpIndex[fp]
		if !ok || !ok2 {
			return policyhubv1.ResultCounts{}, false
		}
		return expectedResults(ci, j), true
	})
	st, stopSummaries, err := newSummaryTracker(ctx, b.informer)
	if err != nil {
		return err
	}
	defer stopSummaries()
	logf("%s: writing %d summaries at %.0f/s...", r.name, len(r.clusterNames), b.o.summaryRate)
	written := make([]time.Time, len(r.clusterNames))
	writes := b.hubWrites(ctx)
	before := b.snapshot(h)
	start := time.Now()
	defer b.profileCPU(ctx, h, 60*time.Second, r.name+"-aggregation-cpu.pb.gz")()
	// As many writes in flight as it takes to hold the rate: agents do not wait for each other.
	sem := make(chan struct{}, 1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range r.clusterNames {
		if wait := time.Until(start.Add(time.Duration(float64(i) / b.o.summaryRate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u, err := b.summary(r, i)
			if err == nil {
				hash, _, _ := unstructured.NestedString(u.Object, "spec", "contentHash")
				st.expect(r.clusterNames[i], hash)
				err = b.hub.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("policyhub-agent"), client.ForceOwnership)
				// The clock starts when the summary is stored, as the hub can see it.
				written[i] = time.Now()
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	r.agg.sendSpan = time.Since(start)
	wg.Wait()
	r.agg.writeSpan = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	deadline := time.Now().Add(b.o.timeout)
	t.waitAll(ctx, stampResults, r.fps, r.clusterNames, deadline)
	aggregated := st.wait(r.clusterNames, deadline)
	r.agg.cpu = cpuBetween(before, b.snapshot(h))
	r.agg.hubWrites = writesBetween(writes, b.hubWrites(ctx))
	for i, c := range r.clusterNames {
		if s, ok := aggregated[c]; ok {
			r.agg.metricLatencies = append(r.agg.metricLatencies, max(s.Sub(written[i]).Seconds(), 0))
		} else {
			r.agg.metricNotReached++
		}
	}
	slices.Sort(r.agg.metricLatencies)
	at, _ := t.reachedAt(stampResults, r.fps, r.clusterNames)
	r.agg.ran = true
	for i, c := range r.clusterNames {
		s, ok := at[c]
		if !ok {
			r.agg.notReached++
			continue
		}
		// The status can arrive before the write's answer: 0.
		r.agg.latencies = append(r.agg.latencies, max(s.Sub(written[i]).Seconds(), 0))
	}
	slices.Sort(r.agg.latencies)
	r.statusResults = t.statusBytes()
	if clusters, err := b.metricClusters(ctx, h); err == nil {
		for _, c := range r.clusterNames {
			if clusters[c] {
				r.agg.metricClusters++
			}
		}
	} else {
		logf("%s: hub /metrics: %v", r.name, err)
	}
	logf("%s: summaries in every status for %d of %d clusters; p50 %.2fs p99 %.2fs", r.name, len(r.agg.latencies), len(r.clusterNames),
		percentile(r.agg.latencies, 50), percentile(r.agg.latencies, 99))
	return nil
}

// metricClusters is the set of clusters policyhub_policy_results has series for.
func (b *bench) metricClusters(ctx context.Context, h *hubProc) (map[string]bool, error) {
	m, err := h.scrape(ctx, "policyhub_policy_results")
	if err != nil {
		return nil, err
	}
	return m.labelValues("policyhub_policy_results", "cluster"), nil
}
