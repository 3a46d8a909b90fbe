package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/engine"
	"github.com/policyhub/policyhub/hub/metrics"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/source"
)

// PolicySetReconciler syncs PolicySets: a source step reads the set's source when it is due and
// keeps each version read in a snapshot on the hub (policyset_source.go); the engine then places
// and renders the snapshot's members like a FleetPolicy's one policy, and brings back their
// state.
type PolicySetReconciler struct {
	engine.DeclarationOptions

	// APIReader reads what the cache does not hold: snapshots, registry Secrets.
	APIReader client.Reader
	// Limits bound what a source may bring in; zero means source.DefaultLimits.
	Limits source.Limits
	// FluxSources are the Flux source kinds the hub serves (FluxSourcesServed): watched, and
	// the only ones a set may read.
	FluxSources []schema.GroupVersionKind
	// Flux fences the Flux sources sets may read: their namespaces, and the one server artifacts
	// are downloaded from. The zero fence reads none.
	Flux source.FluxFence
	// HTTPClient downloads Flux artifacts; nil means Flux.Client(), which dials nothing else.
	HTTPClient *http.Client
	// Rollouts exports the sets' rollouts as metrics, their policy label pset/NAME (nil: not).
	Rollouts *metrics.Rollout

	room    engine.Room
	sources sourceRoom
}

// SetupWithManager registers the reconciler: PolicySet changes, the inventory, the policy
// library ConfigMaps of the hub's namespace, and the agents' summaries and workers' results of
// the sets' clusters trigger it.
func (r *PolicySetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Limits == (source.Limits{}) {
		r.Limits = source.DefaultLimits
	}
	b := engine.ControllerFor(mgr, "policyset", policyhubv1.KindPolicySet, &policyhubv1.PolicySet{}, &r.DeclarationOptions, &r.room, r.every, r.inCluster, r.ofPlacement)
	inHub := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Namespace })
	b = b.Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.ofLibrary), builder.WithPredicates(inHub))
	// Where its exceptions are in force marks its namespaced CEL members (markExceptionsInForce).
	b = b.Watches(&policyhubv1.ClusterStatusSlice{}, handler.EnqueueRequestsFromMapFunc(r.room.Rerendering(ofExceptionSlice(r.Reader, policyhubv1.KindPolicySet, r.every))),
		builder.WithPredicates(engine.SlicesOfKinds(policyhubv1.KindFleetPolicyException), engine.SyncedClustersChanged()))
	for _, gvk := range r.FluxSources {
		src := &unstructured.Unstructured{}
		src.SetGroupVersionKind(gvk)
		b = b.Watches(src, handler.EnqueueRequestsFromMapFunc(r.ofFluxSource), builder.WithPredicates(artifactChanged()))
	}
	if r.HTTPClient == nil {
		r.HTTPClient = r.Flux.Client()
	}
	return b.Complete(r)
}

// artifactChanged passes a Flux source's creation, deletion, and updates that change its
// artifact (a new revision) or readiness: source-controller writes its status on every
// reconcile, and a set reads its source again only when there is something new to read.
func artifactChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*unstructured.Unstructured)
		updated, okNew := e.ObjectNew.(*unstructured.Unstructured)
		if !okOld || !okNew {
			return true
		}
		digest := func(u *unstructured.Unstructured) string {
			d, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "digest")
			return d
		}
		return digest(old) != digest(updated)
	}}
}

// ofFluxSource maps a Flux source to the sets reading it, and marks their source due.
func (r *PolicySetReconciler) ofFluxSource(ctx context.Context, obj client.Object) []reconcile.Request {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	var reqs []reconcile.Request
	for _, ps := range r.list(ctx) {
		if ref := ps.Spec.Source.FluxSource; ref != nil && ref.Kind == kind && ref.Namespace == obj.GetNamespace() && ref.Name == obj.GetName() {
			key := client.ObjectKeyFromObject(&ps)
			r.sources.touch(key)
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

func (r *PolicySetReconciler) list(ctx context.Context) []policyhubv1.PolicySet {
	list := &policyhubv1.PolicySetList{}
	if err := r.Client.List(ctx, list, engine.ReadOnlyList); err != nil {
		log.FromContext(ctx).Error(err, "list PolicySets")
		return nil
	}
	return list.Items
}

func (r *PolicySetReconciler) every(ctx context.Context, _ client.Object) []reconcile.Request {
	return engine.RequestsFor[policyhubv1.PolicySet](r.list(ctx), nil)
}

func (r *PolicySetReconciler) ofPlacement(ctx context.Context, obj client.Object) []reconcile.Request {
	key := placement.PlacementOf(obj)
	return engine.RequestsFor(r.list(ctx), func(ps *policyhubv1.PolicySet) bool { return placement.Names(&ps.Spec.Placement, "", key) })
}

func (r *PolicySetReconciler) inCluster(ctx context.Context, summary client.Object) []reconcile.Request {
	return engine.DeclarationsInCluster(ctx, r.Reader, policyhubv1.KindPolicySet, r.Namespace, summary.GetNamespace())
}

// ofLibrary maps a policy library ConfigMap (created, changed or deleted) to the sets reading
// ConfigMaps, and marks their source due: a library may start or stop matching a selector.
func (r *PolicySetReconciler) ofLibrary(ctx context.Context, _ client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ps := range r.list(ctx) {
		if ps.Spec.Source.ConfigMaps != nil {
			key := client.ObjectKeyFromObject(&ps)
			r.sources.touch(key)
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// Reconcile reads the set's source when due, then runs place → render → sync over the version
// kept, and records the outcome.
func (r *PolicySetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ps := &policyhubv1.PolicySet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ps); err != nil {
		if apierrors.IsNotFound(err) {
			r.room.Forget(req.NamespacedName)
			r.sources.forget(req.NamespacedName)
			if r.Rollouts != nil {
				r.Rollouts.Delete(rolloutMetricName(req.Name))
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d := &policySet{PolicySet: ps, r: r}
	reconciler := r.Engine(&r.room)
	if !ps.DeletionTimestamp.IsZero() {
		// The snapshots go with the set; the hub does not wait for the garbage collector.
		if err := r.deleteSnapshots(ctx, ps); err != nil {
			return ctrl.Result{}, err
		}
		return reconciler.Reconcile(ctx, req.NamespacedName, d)
	}
	if ps.Spec.Suspend {
		return reconciler.Reconcile(ctx, req.NamespacedName, d)
	}
	readSource := r.readSource
	if !r.Writes(policyhubv1.KindPolicySet, ps) {
		readSource = r.followSource
	}
	read, err := readSource(ctx, req.NamespacedName, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	if read.members == nil {
		// No version was ever read: nothing to dispatch; the status says why.
		return ctrl.Result{RequeueAfter: read.wake}, nil
	}
	d.members = read.members
	res, err := reconciler.Reconcile(ctx, req.NamespacedName, d)
	res.RequeueAfter = engine.MinPositive(res.RequeueAfter, read.wake)
	return res, err
}

// policySet is a PolicySet as the engine's declaration.
type policySet struct {
	*policyhubv1.PolicySet
	r *PolicySetReconciler
	// members are the policies of the version kept (status.source.snapshot).
	members *source.Artifact
	// transitions are the Events of this reconcile's rollout step, recorded once the status is
	// written.
	transitions []rolloutEvent
	// legacy are the Kyverno legacy objects of the clusters whose summaries this reconcile read
	// (a rollout gate's maxLegacyObjects).
	legacy map[string]*int64
}

func (d *policySet) Object() policyhubv1.Declaration { return d.PolicySet }
func (d *policySet) Kind() string                    { return policyhubv1.KindPolicySet }
func (d *policySet) Suspended() bool                 { return d.Spec.Suspend }
func (d *policySet) Prune() bool                     { return declare.Prune(d.Spec.Prune) }
func (d *policySet) Copy() engine.Declaration {
	return &policySet{PolicySet: d.PolicySet.DeepCopy(), r: d.r, members: d.members, transitions: d.transitions}
}

func (d *policySet) Source(hubID string) string {
	return render.PolicySetOwner(hubID, d.Name).Source()
}

func (d *policySet) Render(ctx context.Context) (*engine.Rendering, error) {
	inv, err := placement.ReadInventory(ctx, d.r.Reader, d.r.SecretNamespace)
	if err != nil {
		return nil, fmt.Errorf("read the cluster inventory: %w", err)
	}
	stable, err := d.r.stableMembers(ctx, d.PolicySet)
	if err != nil {
		return nil, err
	}
	t, members, plan, err := declare.PolicySetTargets(d.r.HubID, d.PolicySet, d.members, stable, inv)
	if err != nil {
		return nil, err
	}
	if err := declare.MarkExceptionsInForce(ctx, d.r.Reader, policyhubv1.KindPolicySet, d.Name, declare.MemberExceptedRef, t); err != nil {
		return nil, err
	}
	return &engine.Rendering{Targets: t, Rollout: plan, Detail: members}, nil
}

// RenderInput is the version the set runs and, when it rolls out, the rollout's state: a new
// version, or a wave's new phase, renders anew.
func (d *policySet) RenderInput() string {
	input := ""
	if d.members != nil {
		input = d.members.Digest
	}
	if d.Spec.Rollout != nil && d.Status.Rollout != nil {
		state, err := json.Marshal(d.Status.Rollout)
		if err != nil {
			return input + fmt.Sprint(d.Status.Rollout) // never for a status read from the API
		}
		input += string(state)
	}
	return input
}

// SetResults sets the clusters' results, and in each this replica works its members Kyverno
// reports fail or error results of (see memberViolations).
func (d *policySet) SetResults(clusters []policyhubv1.ClusterStatus, read engine.SummaryRead, owned map[string][]aggregate.Policy, now time.Time) []policyhubv1.ClusterStatus {
	d.legacy = legacyCounts(read)
	clusters = engine.SetClusterResults(clusters, read, owned, now)
	recordLegacy(clusters, read, d.legacy, d.Spec.Rollout.GatesOnLegacyObjects())
	for i := range clusters {
		if c := &clusters[i]; !read.Unread[c.Name] {
			c.Violating = violatingMembers(read.Summaries[c.Name], owned[c.Name])
		}
	}
	return clusters
}

// Progress counts the members and names those failing or in conflict somewhere, from the
// workers' outcomes: a member Kyverno refuses fails alone, and says so here with Kyverno's words.
func (d *policySet) Progress(r *engine.Rendering, outcomes []engine.Outcome, clusters []policyhubv1.ClusterStatus, now time.Time) engine.Progress {
	members, _ := r.Detail.([]*unstructured.Unstructured) // the members rendered (of the current version)
	d.Status.Members = policyhubv1.MemberCounts{Total: int32(len(members)), ByEngine: membersByEngine(members)}
	d.Status.AttentionMembers, d.Status.Members.Failed, d.Status.Members.Conflict = memberAttention(outcomes)
	violating := memberViolations(clusters)
	d.Status.Members.Violating = int32(len(violating))
	if room := policyhubv1.MaxAttentionMembers - len(d.Status.AttentionMembers); room > 0 {
		d.Status.AttentionMembers = append(d.Status.AttentionMembers, violating[:min(room, len(violating))]...)
	}
	p := d.rolloutProgress(r, outcomes, clusters, now)
	if held := sourceHolding(d.PolicySet); held != "" {
		// The clusters hold the version kept, but what the source holds now is unknown: not Ready
		// (a stalled rollout keeps its own reason: a user must act on it first).
		if p.Holding != "" {
			held += "; " + p.Holding
		}
		p.Holding = held
		if !p.Stalled {
			p.Reason = ReasonSourceNotReady
		}
	}
	return p
}

// membersByEngine counts members by the engine of their kind's group, in PolicyEngines' order;
// a member of no engine's group (none is admitted) is counted nowhere.
func membersByEngine(members []*unstructured.Unstructured) []policyhubv1.EngineCount {
	counts := map[policyhubv1.PolicyEngine]int32{}
	for _, m := range members {
		if e, ok := policyhubv1.EngineOfAPIVersion(m.GetAPIVersion()); ok {
			counts[e]++
		}
	}
	var out []policyhubv1.EngineCount
	for _, e := range policyhubv1.PolicyEngines() {
		if n := counts[e]; n > 0 {
			out = append(out, policyhubv1.EngineCount{Engine: e, Count: n})
		}
	}
	return out
}

// rolloutProgress steps the set's rollout, when it has one.
func (d *policySet) rolloutProgress(r *engine.Rendering, outcomes []engine.Outcome, clusters []policyhubv1.ClusterStatus, now time.Time) engine.Progress {
	if r.Rollout == nil {
		d.Status.Rollout = nil
		return engine.Progress{}
	}
	// The gates sum what the set's members measured in each cluster of the wave (owned): the set
	// is promoted as a unit.
	step := stepRollout(r.Rollout, outcomes, clusters, d.legacy, nil, now, d.GetAnnotations(), d.Spec.Rollout.Paused, d.Status.Rollout,
		func() *policyhubv1.StableVersion {
			return &policyhubv1.StableVersion{Revision: r.Rollout.Revision, Snapshot: d.Status.Source.Snapshot, MembersDigest: d.Status.Source.MembersDigest}
		})
	d.transitions, d.Status.Rollout = step.transitions, step.status
	return step.progress
}

func (d *policySet) AfterStatus(context.Context) time.Duration {
	announceRollout(d.r.Recorder, d.PolicySet, d.transitions)
	if d.r.Rollouts != nil {
		d.r.Rollouts.Set(rolloutMetricName(d.Name), d.Status.Rollout)
	}
	return 0
}

// rolloutMetricName is a set's policy label in the rollout metrics: pset/NAME, as the CLI names
// it, so that it never meets a FleetPolicy's.
func rolloutMetricName(name string) string { return "pset/" + name }

// memberAttention folds the clusters' failed and conflicting objects into the members that need
// attention (at most policyhubv1.MaxAttentionMembers: failed first, then the most clusters), and
// counts the members failed and in conflict.
func memberAttention(outcomes []engine.Outcome) (attention []policyhubv1.MemberAttention, failed, conflict int32) {
	type key struct {
		ref    policyhubv1.MemberRef
		action string
	}
	byMember := map[key]*policyhubv1.MemberAttention{}
	for _, o := range outcomes {
		if o.Pending {
			continue
		}
		for _, p := range o.Result.Problems {
			k := key{policyhubv1.MemberRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}, p.Action}
			if a, ok := byMember[k]; ok {
				a.Clusters++
				continue
			}
			byMember[k] = &policyhubv1.MemberAttention{MemberRef: k.ref, Action: p.Action, Clusters: 1, Cluster: o.Cluster, Message: policyhubv1.TruncateMessage(p.Message, 512)}
			if p.Action == string(policyhubv1.ClusterPhaseFailed) {
				failed++
			} else {
				conflict++
			}
		}
	}
	all := make([]policyhubv1.MemberAttention, 0, len(byMember))
	for _, a := range byMember {
		all = append(all, *a)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Action != b.Action {
			return a.Action == string(policyhubv1.ClusterPhaseFailed)
		}
		if a.Clusters != b.Clusters {
			return a.Clusters > b.Clusters
		}
		return memberKey(a.MemberRef) < memberKey(b.MemberRef)
	})
	if len(all) > policyhubv1.MaxAttentionMembers {
		all = all[:policyhubv1.MaxAttentionMembers]
	}
	if len(all) == 0 {
		all = nil
	}
	return all, failed, conflict
}

// maxEntryViolating is ClusterStatus.violating's bound (its CRD's maxItems).
const maxEntryViolating = 50

// violatingMembers are the members (of policies, the set's in the cluster) the cluster's summary s
// (nil: none) reports fail or error results of, most first, at most maxEntryViolating.
func violatingMembers(s *policyhubv1.PolicyReportSummary, policies []aggregate.Policy) []policyhubv1.MemberViolations {
	if s == nil {
		return nil
	}
	var out []policyhubv1.MemberViolations
	aggregate.EachPolicy(s, policies, func(i int, p *policyhubv1.PolicySummary) {
		n := aggregate.AddCount(0, p.Results.Fail)
		if n = aggregate.AddCount(n, p.Results.Error); n > 0 {
			m := policies[i]
			out = append(out, policyhubv1.MemberViolations{MemberRef: policyhubv1.MemberRef{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}, Violations: n})
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Violations != out[j].Violations {
			return out[i].Violations > out[j].Violations
		}
		return memberKey(out[i].MemberRef) < memberKey(out[j].MemberRef)
	})
	return out[:min(len(out), maxEntryViolating)]
}

// memberViolations are the members Kyverno reports fail or error results of, over the clusters'
// state (see violatingMembers): most violations first, each with the cluster where it has the most.
func memberViolations(clusters []policyhubv1.ClusterStatus) []policyhubv1.MemberAttention {
	type tally struct {
		clusters   int32
		violations int64
		worst      string
		worstCount int64
	}
	by := map[policyhubv1.MemberRef]*tally{}
	for _, c := range clusters {
		for _, v := range c.Violating {
			t := by[v.MemberRef]
			if t == nil {
				t = &tally{}
				by[v.MemberRef] = t
			}
			t.clusters++
			t.violations = aggregate.AddCount(t.violations, v.Violations)
			if v.Violations > t.worstCount || (v.Violations == t.worstCount && c.Name < t.worst) {
				t.worst, t.worstCount = c.Name, v.Violations
			}
		}
	}
	out := make([]policyhubv1.MemberAttention, 0, len(by))
	for m, t := range by {
		out = append(out, policyhubv1.MemberAttention{
			MemberRef: m, Action: "Violating",
			Clusters: t.clusters, Cluster: t.worst, Violations: t.violations,
			Message: fmt.Sprintf("%d fail and error results in %d clusters, %d in %s", t.violations, t.clusters, t.worstCount, t.worst),
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Violations != out[j].Violations {
			return out[i].Violations > out[j].Violations
		}
		return memberKey(out[i].MemberRef) < memberKey(out[j].MemberRef)
	})
	return out
}

func memberKey(m policyhubv1.MemberRef) string { return m.Kind + "/" + m.Namespace + "/" + m.Name }
