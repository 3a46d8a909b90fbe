package engine

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

// keepOutcomes drops the clusters a declaration left and was pruned from, and says whether a
// cluster is failing (its worker retries it) and how many have no result yet.
func keepOutcomes(outcomes []Outcome, targets *render.Targets) (kept []Outcome, failing bool, pending int) {
	for _, o := range outcomes {
		leaving := targets.Objects[o.Cluster] == nil
		if leaving && !o.Pending && o.Result.Phase == policyhubv1.ClusterPhaseSynced {
			continue // pruned: no longer part of this declaration
		}
		if leaving {
			o.Result.Message = "no longer selected; pruning: " + o.Result.Message
		}
		kept = append(kept, o)
		switch {
		case o.Pending:
			pending++
		case retrying(o.Result.Phase, o.Result.Message):
			failing = true
		}
	}
	return kept, failing, pending
}

// retrying says whether a cluster's worker retries the declaration there with backoff: it
// failed or was locked out; a refusal for the tenant's budget is not retried (it is Stalled).
func retrying(phase policyhubv1.ClusterPhase, message string) bool {
	switch phase {
	case policyhubv1.ClusterPhaseFailed:
		return !work.OverBudget(true, message)
	case policyhubv1.ClusterPhaseLockHeld:
		return true
	}
	return false
}

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
		if err := d.workers.Want(w.cluster, w.decl, w.token); err != nil {
			outcomes = append(outcomes, Outcome{Cluster: w.cluster, Result: &work.DeclarationResult{Source: w.decl.Source, Phase: policyhubv1.ClusterPhaseFailed, Message: err.Error()}})
			continue
		}
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

// ownedWants keeps the wants of the clusters this replica works.
func (s share) ownedWants(wants []wantedIn) []wantedIn {
	if s.single {
		return wants
	}
	kept := wants[:0]
	for _, w := range wants {
		if s.owns(w.cluster) {
			kept = append(kept, w)
		}
	}
	return kept
}
