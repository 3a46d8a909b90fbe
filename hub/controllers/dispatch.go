package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

// What every declaration's reconciler shares: dispatching to the clusters through the gateway,
// remembering clean syncs, reading the agents' summaries.

// dispatched is what the dispatch half handed the clusters' workers, and what they answered so
// far: all the status half knows of the clusters besides the agents' summaries.
type dispatched struct {
	*Rendering
	// kept are the clusters' outcomes, without the clusters the declaration left and was pruned
	// from; failing says whether one is failing (its worker retries it), pending how many have
	// no result yet.
	kept    []Outcome
	failing bool
	pending int
}

// dispatchHalf runs a declaration's flow towards its clusters: spec and inventory → declare
// (place → rollout → render) → the wanted state to each cluster's worker, including the prune of
// the clusters it left. The rendering is the results room's while nothing it was made from
// changed, so that a reconcile woken by results or summaries renders nothing.
func (e Engine) dispatchHalf(ctx context.Context, key types.NamespacedName, d Declaration, before []policyhubv1.ClusterStatus) (dispatched, error) {
	r, err := e.render(ctx, key, d)
	if err != nil {
		return dispatched{}, err
	}
	source := d.Source(e.hubID)
	prune := d.Prune()
	sh := e.shareOf(d)
	obj := d.Object()
	wants := sh.ownedWants(targetWants(r.Targets, prune, r.token, e.tenantOf(obj), obj.GetCreationTimestamp().Time))
	// Clusters that were synced before and are no longer selected: prune there, then forget them.
	// With prune off the policies stay there and the cluster just leaves the status.
	leaving := sh.ownedNames(declare.Leaving(before, r.Targets.Objects))
	if !prune {
		for _, c := range leaving {
			e.dispatch.workers.Drop(c, source)
		}
		leaving = nil
	}
	wants = append(wants, pruneWants(source, leaving)...)
	outcomes := e.dispatch.want(wants)
	kept, failing, pending := keepOutcomes(outcomes, r.Targets)
	for _, o := range outcomes {
		if r.Targets.Objects[o.Cluster] == nil && !o.Pending && o.Result.Phase == policyhubv1.ClusterPhaseSynced {
			e.dispatch.workers.Drop(o.Cluster, source) // pruned there: nothing more to want
		}
	}
	return dispatched{Rendering: r, kept: kept, failing: failing, pending: pending}, nil
}

// render returns the declaration's rendering: the results room's, when neither the declaration
// (its generation, annotations and renderInput) nor anything read from elsewhere changed since
// it was made; else a new one, kept there.
func (e Engine) render(ctx context.Context, key types.NamespacedName, d Declaration) (*Rendering, error) {
	obj := d.Object()
	input := fmt.Sprint(obj.GetGeneration(), obj.GetAnnotations(), d.RenderInput())
	r, epoch := e.room.rendered(key, input)
	if r != nil {
		return r, nil
	}
	e.renders.Rendered(d.Kind())
	r, err := d.Render(ctx)
	if err != nil {
		return nil, err
	}
	r.input, r.epoch = input, epoch
	// The token names what the declaration wants: a new generation, annotation (a requested
	// reconcile) or rendering makes the workers sync it again; the same token costs nothing.
	r.token = fmt.Sprint(obj.GetGeneration(), obj.GetAnnotations(), r.Targets.Fingerprint())
	e.room.keep(key, r)
	return r, nil
}

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
func (d dispatcher) want(wants []wantedIn) []Outcome {
	outcomes := make([]Outcome, 0, len(wants))
	for _, w := range wants {
		cfg, ok := d.workers.Config(w.cluster)
		if !ok {
			var err error
			if cfg, err = gateway.ClusterConfig(d.gateway, w.cluster); err != nil {
				outcomes = append(outcomes, Outcome{Cluster: w.cluster, Result: &work.DeclarationResult{Source: w.decl.Source, Phase: policyhubv1.ClusterPhaseFailed, Message: err.Error()}})
				continue
			}
		}
		d.workers.Want(work.Cluster{Name: w.cluster, Config: cfg}, w.decl, w.token)
		outcomes = append(outcomes, d.outcome(w))
	}
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].Cluster < outcomes[j].Cluster })
	return outcomes
}

// outcome is the worker's latest result for the wanted state, or Pending.
func (d dispatcher) outcome(w wantedIn) Outcome {
	r, ok := d.workers.Result(w.cluster, w.decl.Source)
	if !ok || r.Token != w.token {
		return Outcome{Cluster: w.cluster, Pending: true, Result: &work.DeclarationResult{
			Source: w.decl.Source, Phase: policyhubv1.ClusterPhasePending, Message: "waiting for the cluster's worker"}}
	}
	result := r.DeclarationResult
	return Outcome{Cluster: w.cluster, Result: &result, Wrote: r.Wrote, WroteAt: r.WroteAt, Seq: r.Seq}
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

// SummaryRead is what a reconcile read of its clusters' summaries.
type SummaryRead struct {
	// Summaries are the accepted Summaries, by cluster.
	Summaries map[string]*policyhubv1.PolicyReportSummary
	// Unread are the clusters whose summary could not be read (a transient error): their
	// results are kept as they were rather than dropped.
	Unread map[string]bool
	// Heard is when the clusters' agents last renewed their Leases (nil: not known).
	Heard *heartbeat.Heard
}

// LastHeard is when the hub last heard from the cluster's agent, by its clock: the summary s or,
// later, its Lease renewed.
func (r SummaryRead) LastHeard(s *policyhubv1.PolicyReportSummary, now time.Time) time.Time {
	return aggregate.LastHeard(s, r.Heard.At(s.Namespace), now)
}

// readSummaries reads the accepted summaries of the clusters this replica works (sh): those
// other replicas work are unread here, their state kept as their owners wrote it (with sharing
// on, this replica's cache holds only its own clusters' summaries). They are the cache's own
// objects (one list, no copies: a reconcile at a thousand clusters would otherwise copy a
// thousand summaries), so they must not be changed.
func readSummaries(ctx context.Context, reader, metas client.Reader, clusters []policyhubv1.ClusterStatus, sh share) SummaryRead {
	summaries, unread := map[string]*policyhubv1.PolicyReportSummary{}, map[string]bool{}
	wanted := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		if sh.owns(c.Name) {
			wanted[c.Name] = true
		} else {
			unread[c.Name] = true
		}
	}
	list := &policyhubv1.PolicyReportSummaryList{}
	if err := reader.List(ctx, list, ReadOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "read the clusters' summaries; their results are kept as they were")
		for _, c := range clusters {
			unread[c.Name] = true
		}
		return SummaryRead{Summaries: summaries, Unread: unread}
	}
	cached := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		cached[s.Namespace] = true
		if wanted[s.Namespace] && s.Accepted() == nil && !RefusedInvalid(s) {
			summaries[s.Namespace] = s
		}
	}
	if metas != nil {
		// A cluster this replica took over has a summary its cache holds only once it is
		// labelled as worked by this replica (SummaryLabeler): until then it is unread, not gone.
		for name := range wanted {
			if !cached[name] && summaryExists(ctx, metas, name) {
				unread[name] = true
			}
		}
	}
	return SummaryRead{Summaries: summaries, Unread: unread}
}

// summaryExists says whether the cluster has a summary, by every summary's metadata (an error:
// as if it had, so that what is known is kept).
func summaryExists(ctx context.Context, metas client.Reader, cluster string) bool {
	err := metas.Get(ctx, client.ObjectKey{Namespace: cluster, Name: policyhubv1.SummaryName}, SummaryMeta())
	return !apierrors.IsNotFound(err)
}

// emitEvents records the clusters whose phase changed or that were written to: a Warning per
// cluster in trouble, and one Normal Event for all the clusters that synced.
func emitSyncEvents(recorder events.EventRecorder, obj runtime.Object, before []policyhubv1.ClusterStatus, outcomes []Outcome) {
	prev := map[string]policyhubv1.ClusterPhase{}
	for _, s := range before {
		prev[s.Name] = s.Phase
	}
	var synced []string
	for _, o := range outcomes {
		if prev[o.Cluster] == o.Result.Phase && !o.Wrote {
			continue
		}
		switch o.Result.Phase {
		case policyhubv1.ClusterPhaseSynced, policyhubv1.ClusterPhaseDryRun:
			synced = append(synced, fmt.Sprintf("%s (%s)", o.Cluster, o.Result.Message))
		case policyhubv1.ClusterPhasePending:
			// Not a problem, and not news: the cluster's result, when it comes, is announced.
		default:
			recorder.Eventf(obj, nil, corev1.EventTypeWarning, string(o.Result.Phase), "Sync", "%s: %s", o.Cluster, o.Result.Message)
		}
	}
	if len(synced) > 0 {
		recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", policyhubv1.TruncateMessage(strings.Join(synced, "; "), 1024))
	}
}

// targetWants are what a declaration wants in each selected cluster, under token; its objects
// count against tenant's budget there (see tenantOf), its place in it by created.
func targetWants(t *render.Targets, prune bool, token, tenant string, created time.Time) []wantedIn {
	wants := make([]wantedIn, 0, len(t.Objects))
	for _, cluster := range t.Clusters() {
		wants = append(wants, wantedIn{cluster: cluster, token: token,
			decl: work.Declaration{Source: t.Source, Objects: t.Objects[cluster], DryRun: t.DryRun[cluster], Prune: prune, Tenant: tenant, Created: created}})
	}
	return wants
}

// tenantOf is the tenant whose budget a declaration's objects count against in each cluster: its
// hub namespace (an ApplicationPolicy's, a KubeVela Application's, a FleetPolicyException's),
// unless that is the hub's own namespace, whose writers are fleet admins. Cluster-scoped
// declarations (FleetPolicy, PolicySet) are the platform's: no budget bounds them.
func (e Engine) tenantOf(obj client.Object) string {
	if ns := obj.GetNamespace(); ns != e.namespace {
		return ns
	}
	return ""
}

// ownedPolicies are, per cluster, the policy objects a declaration owns there: the ones its
// results are read for.
func ownedPolicies(objects map[string][]*unstructured.Unstructured) map[string][]aggregate.Policy {
	owned := map[string][]aggregate.Policy{}
	// Clusters share their rendered objects (a set's hundred members in a thousand clusters): a
	// shared list is named once and its names shared too; they are only read.
	type list struct {
		array **unstructured.Unstructured
		n     int
	}
	shared := map[list][]aggregate.Policy{}
	for cluster, objs := range objects {
		if len(objs) == 0 {
			continue
		}
		key := list{&objs[0], len(objs)}
		if policies, ok := shared[key]; ok {
			owned[cluster] = policies
			continue
		}
		policies := make([]aggregate.Policy, 0, len(objs))
		for _, obj := range objs {
			policies = append(policies, aggregate.Policy{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
		shared[key], owned[cluster] = policies, policies
	}
	return owned
}
