package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// summaryCaches is what the replicas scenario measured of the agents' summaries: one written
// for every name, each replica caching only those of the clusters it works.
type summaryCaches struct {
	summaries int
	bytes     int // of one summary, as JSON
	written   time.Duration
	labelled  time.Duration
	ok        bool
	// relabelled: after the kill, until no summary named the killed replica.
	relabelled   time.Duration
	relabelledOK bool
	// before and after are each replica's live heap (go_memstats_next_gc_bytes / 2: the heap
	// the last collection left, GOGC=100) without and with the summaries.
	before, after map[string]float64
}

// replicaSummaryPolicies and replicaSummaryViolations size the replicas scenario's summaries:
// a cluster running a library of thirty policies, its top violations with long messages (a
// hundred policies made the hub's apiserver, on this machine's 2 shared cores, take ~0.6 s an
// apply: session 21).
const (
	replicaSummaryPolicies   = 30
	replicaSummaryViolations = 10
)

// replicaSummary is the summary an agent of cluster would write (server-side applied).
func replicaSummary(cluster string) (*unstructured.Unstructured, error) {
	now := metav1.Now()
	spec := policyhubv1.PolicyReportSummarySpec{
		Cluster: cluster, GeneratedAt: &now,
		HeartbeatInterval: &metav1.Duration{Duration: time.Hour}, // no result turns stale during the benchmark
		ContentHash:       fmt.Sprintf("bench-%d", now.UnixNano()),
		Engine:            policyhubv1.EngineInfo{ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2"}, KyvernoWebhooks: true},
	}
	for j := range replicaSummaryPolicies {
		res := policyhubv1.ResultCounts{Pass: 40, Fail: int64(j % 3)}
		spec.Policies = append(spec.Policies, policyhubv1.PolicySummary{Name: fmt.Sprintf("library-policy-%03d", j), Kind: "ClusterPolicy",
			Severity: "medium", Category: "Pod Security Standards (Restricted)", Title: "Library policy " + fmt.Sprint(j), Results: res})
		spec.Totals.Pass += res.Pass
		spec.Totals.Fail += res.Fail
	}
	for j := range replicaSummaryViolations {
		spec.Violations = append(spec.Violations, policyhubv1.Violation{Policy: fmt.Sprintf("library-policy-%03d", j), Rule: "check-containers", Result: "fail", Severity: "medium",
			Resource: policyhubv1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: fmt.Sprintf("service-%02d", j)},
			Message:  "validation error: " + strings.Repeat("containers must set securityContext.runAsNonRoot to true; ", 4)})
	}
	return summaryObject(cluster, spec)
}

// summariesLabelled counts the summaries on the hub selected by the label selector (their
// metadata only: a selector keeps both the apiserver's answer and this poll small).
func (b *bench) summariesLabelled(ctx context.Context, selector string) (int, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return 0, err
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(policyhubv1.GroupVersion.WithKind("PolicyReportSummaryList"))
	if err := b.hub.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// waitNoSummary waits until no summary matches selector, polling every few seconds (a list of
// thousands of summaries is heavy for the hub's apiserver, even of their metadata), and returns
// how long after since that was.
func (b *bench) waitNoSummary(ctx context.Context, selector string, since time.Time) (time.Duration, bool) {
	for deadline := time.Now().Add(b.o.timeout); time.Now().Before(deadline); {
		n, err := b.summariesLabelled(ctx, selector)
		if err == nil && n == 0 {
			return time.Since(since), true
		}
		logf("replicas: %d summaries still %s (%v)", n, selector, err)
		select {
		case <-ctx.Done():
			return time.Since(since), false
		case <-time.After(3 * time.Second):
		}
	}
	return time.Since(since), false
}

// summariesLeft is how long after since until no summary is labelled for replica (it was killed:
// the new owners of its clusters label theirs).
func (b *bench) summariesLeft(ctx context.Context, replica string, since time.Time) (time.Duration, bool) {
	return b.waitNoSummary(ctx, policyhubv1.LabelWorkedBy+"="+replica, since)
}

// liveHeaps are the replicas' live heaps, by name.
func liveHeaps(ctx context.Context, procs []*hubProc, names []string) map[string]float64 {
	out := map[string]float64{}
	for i, h := range procs {
		if m, err := h.scrape(ctx, "go_memstats_next_gc_bytes"); err == nil {
			next, _ := m.sum("go_memstats_next_gc_bytes", nil)
			out[names[i]] = next / 2
		}
	}
	return out
}

// measureSummaryCaches writes a summary for every name, as the clusters' agents would, waits until
// each is labelled for the replica that works its cluster, and measures the replicas' heaps.
func (b *bench) measureSummaryCaches(ctx context.Context, procs []*hubProc, replicaNames, names []string) (*summaryCaches, error) {
	if err := waitCollections(ctx, procs); err != nil {
		return nil, fmt.Errorf("replicas: wait for the replicas' collections: %w", err)
	}
	res := &summaryCaches{summaries: len(names), before: liveHeaps(ctx, procs, replicaNames)}
	one, err := replicaSummary(names[0])
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(one.Object)
	res.bytes = len(raw)
	logf("replicas: writing %d summaries of %d KiB, as the agents would...", len(names), res.bytes/1024)
	start := time.Now()
	if err := inParallel(8, len(names), func(i int) error {
		u, err := replicaSummary(names[i])
		if err != nil {
			return err
		}
		return b.hub.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("policyhub-agent"), client.ForceOwnership)
	}); err != nil {
		return nil, fmt.Errorf("replicas: write the summaries: %w", err)
	}
	res.written = time.Since(start)
	logf("replicas: %d summaries written in %s", len(names), res.written.Round(time.Second))
	res.labelled, res.ok = b.waitNoSummary(ctx, "!"+policyhubv1.LabelWorkedBy, start)
	if err := waitCollections(ctx, procs); err != nil {
		return nil, fmt.Errorf("replicas: wait for the replicas' collections: %w", err)
	}
	res.after = liveHeaps(ctx, procs, replicaNames)
	logf("replicas: summaries labelled in %s; live heap before %v, after %v", fmtDur(res.labelled, res.ok, b.o.timeout), res.before, res.after)
	return res, nil
}

// printSummaryCaches prints the summaries' rows of the replicas table.
func printSummaryCaches(s *summaryCaches, owned map[string]float64, names []string, timeout time.Duration) {
	if s == nil {
		return
	}
	fmt.Printf("| %d agents' summaries (%d KiB each), written 8 at a time: all written; every one labelled for the replica working its cluster | – | %s; %s |\n",
		s.summaries, s.bytes/1024, s.written.Round(time.Second), fmtDur(s.labelled, s.ok, timeout))
	heap := ""
	for _, n := range names {
		grew := s.after[n] - s.before[n]
		per := 0.0
		if owned[n] > 0 {
			per = grew / owned[n]
		}
		heap += fmt.Sprintf("%s %s → %s (%s a cluster it works); ", n, mib(s.before[n]), mib(s.after[n]), kib(per))
	}
	fmt.Printf("| live heap per replica without → with the summaries | – | %s|\n", heap)
	fmt.Printf("| after the kill: every summary of its clusters labelled for their new owners | – | %s |\n", fmtDur(s.relabelled, s.relabelledOK, timeout))
}

// collections are the replicas' garbage collections so far.
func collections(ctx context.Context, procs []*hubProc) []float64 {
	out := make([]float64, len(procs))
	for i, h := range procs {
		if m, err := h.scrape(ctx, "go_gc_duration_seconds_count"); err == nil {
			out[i], _ = m.sum("go_gc_duration_seconds_count", nil)
		}
	}
	return out
}

// waitCollections waits until every replica collected twice more (the runtime collects at least
// every two minutes), so that the heap the last collection left holds what they cache now.
func waitCollections(ctx context.Context, procs []*hubProc) error {
	before := collections(ctx, procs)
	return waitFor(ctx, 5*time.Minute, func() bool {
		now := collections(ctx, procs)
		for i := range now {
			if now[i] < before[i]+2 {
				return false
			}
		}
		return true
	})
}
