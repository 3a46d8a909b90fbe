package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

// What every declaration's reconciler shares: dispatching to the clusters through the gateway,
// remembering clean syncs, reading the agents' summaries.

type syncJob struct {
	cluster string
	decl    work.Declaration
}

// dispatcher syncs declarations into clusters through cluster-gateway and the shared Batcher.
type dispatcher struct {
	gateway     *rest.Config
	batcher     *work.Batcher
	maxClusters int
}

// syncAll syncs the jobs' clusters in parallel, at most maxClusters at a time; one slow or
// broken cluster never holds up the others beyond its own slot.
func (d dispatcher) syncAll(ctx context.Context, jobs []syncJob) []clusterOutcome {
	limit := d.maxClusters
	if limit <= 0 {
		limit = 8
	}
	outcomes := make([]clusterOutcome, len(jobs))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outcomes[i] = d.syncOne(ctx, job)
		}()
	}
	wg.Wait()
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].cluster < outcomes[j].cluster })
	return outcomes
}

func (d dispatcher) syncOne(ctx context.Context, job syncJob) clusterOutcome {
	cfg, err := gateway.ClusterConfig(d.gateway, job.cluster)
	if err != nil {
		return clusterOutcome{cluster: job.cluster, result: &work.DeclarationResult{Source: job.decl.Source, Phase: policyhubv1.ClusterPhaseFailed, Message: err.Error()}}
	}
	out := d.batcher.Sync(log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", job.cluster)), work.Cluster{Name: job.cluster, Config: cfg}, job.decl)
	return clusterOutcome{cluster: job.cluster, result: out.Result, wrote: out.Wrote}
}

// pruneEverywhere removes a declaration's objects from the clusters and returns the clusters
// where that failed.
func (d dispatcher) pruneEverywhere(ctx context.Context, source string, clusters []policyhubv1.ClusterStatus) []clusterOutcome {
	var jobs []syncJob
	for _, c := range clusters {
		jobs = append(jobs, syncJob{cluster: c.Name, decl: work.Declaration{Source: source, Prune: true}})
	}
	var stuck []clusterOutcome
	for _, o := range d.syncAll(ctx, jobs) {
		if o.result.Phase != policyhubv1.ClusterPhaseSynced {
			o.result.Message = "deleting: could not prune this cluster yet: " + o.result.Message
			stuck = append(stuck, o)
		}
	}
	return stuck
}

// syncMemo remembers, per declaration, the inputs of its last sync that left every cluster in a
// final state, so a reconcile woken only by an agent's summary refreshes the results without
// syncing again. The zero value is ready to use.
type syncMemo struct {
	mu   sync.Mutex
	last map[types.NamespacedName]memo
}

type memo struct {
	inputs string
	at     time.Time
}

// unchangedSince returns when the declaration was last synced from the same inputs, if that was
// less than resync ago (a zero resync never expires).
func (m *syncMemo) unchangedSince(key types.NamespacedName, inputs string, resync time.Duration, now time.Time) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[key]
	if !ok || last.inputs != inputs || (resync > 0 && now.Sub(last.at) >= resync) {
		return time.Time{}, false
	}
	return last.at, true
}

func (m *syncMemo) remember(key types.NamespacedName, inputs string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.NamespacedName]memo{}
	}
	m.last[key] = memo{inputs: inputs, at: at}
}

func (m *syncMemo) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}

// nextWake is when a declaration needs a reconcile without any event: its next resync (counted
// from the last sync, so frequent summaries never postpone it), or sooner when a cluster's
// results turn stale (firstStale, zero when none will).
func nextWake(resync time.Duration, lastSync, firstStale, now time.Time) time.Duration {
	wake := time.Duration(0)
	if resync > 0 {
		wake = max(lastSync.Add(resync).Sub(now), time.Millisecond)
	}
	if !firstStale.IsZero() {
		if stale := max(firstStale.Sub(now)+time.Second, time.Millisecond); wake == 0 || stale < wake {
			wake = stale
		}
	}
	return wake
}

// readSummaries reads the accepted summaries of the clusters.
func readSummaries(ctx context.Context, reader client.Reader, clusters []policyhubv1.ClusterStatus) map[string]*policyhubv1.PolicyReportSummarySpec {
	summaries := map[string]*policyhubv1.PolicyReportSummarySpec{}
	for _, c := range clusters {
		s := &policyhubv1.PolicyReportSummary{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: c.Name, Name: policyhubv1.SummaryName}, s)
		switch {
		case err == nil && acceptedSummary(s) == nil:
			summaries[c.Name] = &s.Spec
		case err != nil && client.IgnoreNotFound(err) != nil:
			log.FromContext(ctx).Error(err, "read the cluster's summary", "cluster", c.Name)
		}
	}
	return summaries
}

// emitEvents records the clusters whose phase changed or that were written to: a Warning per
// cluster in trouble, and one Normal Event for all the clusters that synced.
func emitSyncEvents(recorder events.EventRecorder, obj runtime.Object, before []policyhubv1.ClusterStatus, outcomes []clusterOutcome) {
	prev := map[string]policyhubv1.ClusterPhase{}
	for _, s := range before {
		prev[s.Name] = s.Phase
	}
	var synced []string
	for _, o := range outcomes {
		if prev[o.cluster] == o.result.Phase && !o.wrote {
			continue
		}
		switch o.result.Phase {
		case policyhubv1.ClusterPhaseSynced, policyhubv1.ClusterPhaseDryRun:
			synced = append(synced, fmt.Sprintf("%s (%s)", o.cluster, o.result.Message))
		default:
			recorder.Eventf(obj, nil, corev1.EventTypeWarning, string(o.result.Phase), "Sync", "%s: %s", o.cluster, o.result.Message)
		}
	}
	if len(synced) > 0 {
		recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", policyhubv1.TruncateMessage(strings.Join(synced, "; "), 1024))
	}
}

// targetJobs are the syncs of a declaration's targets, one per selected cluster.
func targetJobs(t *render.Targets, prune bool) []syncJob {
	var jobs []syncJob
	for _, cluster := range t.Clusters() {
		jobs = append(jobs, syncJob{cluster: cluster, decl: work.Declaration{Source: t.Source, Objects: t.Objects[cluster], DryRun: t.DryRun[cluster], Prune: prune}})
	}
	return jobs
}

// ownedPolicies are, per cluster, the policy objects a declaration owns there: the ones its
// results are read for.
func ownedPolicies(objects map[string][]*unstructured.Unstructured) map[string][]aggregate.Policy {
	owned := map[string][]aggregate.Policy{}
	for cluster, objs := range objects {
		for _, obj := range objs {
			owned[cluster] = append(owned[cluster], aggregate.Policy{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
	return owned
}
