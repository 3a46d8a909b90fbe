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
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

// What every declaration's reconciler shares: dispatching to the clusters through the gateway,
// remembering clean syncs, reading the agents' summaries.

// dispatcher hands declarations' desired state to the per-cluster workers and reads back their
// latest results. It never waits for a cluster.
type dispatcher struct {
	gateway *rest.Config
	workers *work.Workers
}

// wantedIn is what a declaration wants in one cluster, under a token naming that state.
type wantedIn struct {
	cluster string
	decl    work.Declaration
	token   string
}

// want hands every cluster its part and returns the clusters' current outcomes: the worker's
// result for that token, or Pending while the worker has none yet.
func (d dispatcher) want(wants []wantedIn) []clusterOutcome {
	outcomes := make([]clusterOutcome, 0, len(wants))
	for _, w := range wants {
		cfg, ok := d.workers.Config(w.cluster)
		if !ok {
			var err error
			if cfg, err = gateway.ClusterConfig(d.gateway, w.cluster); err != nil {
				outcomes = append(outcomes, clusterOutcome{cluster: w.cluster, result: &work.DeclarationResult{Source: w.decl.Source, Phase: policyhubv1.ClusterPhaseFailed, Message: err.Error()}})
				continue
			}
		}
		d.workers.Want(work.Cluster{Name: w.cluster, Config: cfg}, w.decl, w.token)
		outcomes = append(outcomes, d.outcome(w))
	}
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].cluster < outcomes[j].cluster })
	return outcomes
}

// outcome is the worker's latest result for the wanted state, or Pending.
func (d dispatcher) outcome(w wantedIn) clusterOutcome {
	r, ok := d.workers.Result(w.cluster, w.decl.Source)
	if !ok || r.Token != w.token {
		return clusterOutcome{cluster: w.cluster, pending: true, result: &work.DeclarationResult{
			Source: w.decl.Source, Phase: policyhubv1.ClusterPhasePending, Message: "waiting for the cluster's worker"}}
	}
	result := r.DeclarationResult
	return clusterOutcome{cluster: w.cluster, result: &result, wrote: r.Wrote, wroteAt: r.WroteAt, seq: r.Seq}
}

// tokenPrune names the wanted state "none of the declaration's objects here".
const tokenPrune = "prune"

// pruneWants are the wants that remove a declaration's objects from the clusters.
func pruneWants(source string, clusters []string) []wantedIn {
	wants := make([]wantedIn, 0, len(clusters))
	for _, c := range clusters {
		wants = append(wants, wantedIn{cluster: c, decl: work.Declaration{Source: source, Prune: true}, token: tokenPrune})
	}
	return wants
}

// seenResults remembers, per declaration and cluster, the newest worker result already turned
// into status and Events, so a result is announced once however often the declaration is
// reconciled, and when a declaration first asked for its current state and first heard from a
// cluster about it (to coalesce its status writes). The zero value is ready to use.
type seenResults struct {
	mu   sync.Mutex
	last map[types.NamespacedName]*seen
}

type seen struct {
	token      string
	wantedAt   time.Time
	answeredAt time.Time
	seq        map[string]uint64
}

// since returns when the declaration first wanted token (now, if it is new) and when a cluster
// first answered for it (zero until answered is true in a call).
func (s *seenResults) since(key types.NamespacedName, token string, answered bool, now time.Time) (wantedAt, answeredAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[types.NamespacedName]*seen{}
	}
	e := s.last[key]
	if e == nil {
		e = &seen{seq: map[string]uint64{}}
		s.last[key] = e
	}
	if e.token != token {
		e.token, e.wantedAt, e.answeredAt = token, now, time.Time{}
	}
	if answered && e.answeredAt.IsZero() {
		e.answeredAt = now
	}
	return e.wantedAt, e.answeredAt
}

// statusWait is how much longer a declaration's status waits for its clusters' results, so that
// it is written once for all of them rather than once per cluster; zero means write it now.
// With every cluster answered it waits no more. Otherwise it waits coalesce from the first
// answer: clusters fed the same burst of work answer close together, and a slow one is shown
// Pending after that. A status that could only say "every cluster Pending" tells nothing the
// stale observedGeneration does not (kstatus reads it as in progress), so it waits for the
// first answer, up to quiet. A dark cluster answers at once (Failed), so it holds nothing back.
func statusWait(now, wantedAt, answeredAt time.Time, pending int, coalesce, quiet time.Duration) time.Duration {
	if pending == 0 {
		return 0
	}
	due := wantedAt.Add(quiet)
	if !answeredAt.IsZero() {
		due = answeredAt.Add(coalesce)
	}
	return max(due.Sub(now), 0)
}

// fresh marks the outcomes already announced as not written (their write was announced), and
// records the rest as announced.
func (s *seenResults) fresh(key types.NamespacedName, outcomes []clusterOutcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.last[key]
	if e == nil {
		return
	}
	for i := range outcomes {
		o := &outcomes[i]
		if o.pending {
			continue
		}
		if o.seq <= e.seq[o.cluster] {
			o.wrote = false
		}
		e.seq[o.cluster] = max(e.seq[o.cluster], o.seq)
	}
}

func (s *seenResults) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, key)
}

// summaryRead is what a reconcile read of its clusters' summaries.
type summaryRead struct {
	// summaries are the accepted summaries, by cluster.
	summaries map[string]*policyhubv1.PolicyReportSummary
	// unread are the clusters whose summary could not be read (a transient error): their
	// results are kept as they were rather than dropped.
	unread map[string]bool
	// heard is when the clusters' agents last renewed their Leases (nil: not known).
	heard *heartbeat.Heard
}

// lastHeard is when the hub last heard from the cluster's agent, by its clock: the summary s or,
// later, its Lease renewed.
func (r summaryRead) lastHeard(s *policyhubv1.PolicyReportSummary, now time.Time) time.Time {
	return aggregate.LastHeard(s, r.heard.At(s.Namespace), now)
}

// readSummaries reads the accepted summaries of the clusters. They are the cache's own objects
// (one list, no copies: a reconcile at a thousand clusters would otherwise copy a thousand
// summaries), so they must not be changed.
func readSummaries(ctx context.Context, reader client.Reader, clusters []policyhubv1.ClusterStatus) summaryRead {
	summaries, unread := map[string]*policyhubv1.PolicyReportSummary{}, map[string]bool{}
	list := &policyhubv1.PolicyReportSummaryList{}
	if err := reader.List(ctx, list, readOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "read the clusters' summaries; their results are kept as they were")
		for _, c := range clusters {
			unread[c.Name] = true
		}
		return summaryRead{summaries: summaries, unread: unread}
	}
	wanted := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		wanted[c.Name] = true
	}
	for i := range list.Items {
		s := &list.Items[i]
		if wanted[s.Namespace] && s.Accepted() == nil && !refusedInvalid(s) {
			summaries[s.Namespace] = s
		}
	}
	return summaryRead{summaries: summaries, unread: unread}
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
		case policyhubv1.ClusterPhasePending:
			// Not a problem, and not news: the cluster's result, when it comes, is announced.
		default:
			recorder.Eventf(obj, nil, corev1.EventTypeWarning, string(o.result.Phase), "Sync", "%s: %s", o.cluster, o.result.Message)
		}
	}
	if len(synced) > 0 {
		recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", policyhubv1.TruncateMessage(strings.Join(synced, "; "), 1024))
	}
}

// targetWants are what a declaration wants in each selected cluster, under token.
func targetWants(t *render.Targets, prune bool, token string) []wantedIn {
	wants := make([]wantedIn, 0, len(t.Objects))
	for _, cluster := range t.Clusters() {
		wants = append(wants, wantedIn{cluster: cluster, token: token,
			decl: work.Declaration{Source: t.Source, Objects: t.Objects[cluster], DryRun: t.DryRun[cluster], Prune: prune}})
	}
	return wants
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
