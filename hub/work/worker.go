package work

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// WorkersOptions configure Workers.
type WorkersOptions struct {
	// Sync configures the Syncer the workers share.
	Sync Options
	// ClusterConfig is how a worker reaches its cluster (through cluster-gateway:
	// gateway.ClusterConfig over the hub's config), asked once, when the cluster's worker starts:
	// the worker keeps it, so no reconcile builds one (a copy of the gateway's config each cost a
	// tenth of the hub's CPU at 1,000 clusters). Required.
	ClusterConfig func(cluster string) (*rest.Config, error)
	// Window is how long a worker waits for more work before a pass, so declarations handed to
	// it together share one pass; zero means none.
	Window time.Duration
	// Resync makes each worker sync everything wanted in its cluster again after this long: a
	// backstop for drift its watch did not see. Zero means never.
	Resync time.Duration
	// RetryMin and RetryMax bound the backoff of a cluster that is unreachable or whose
	// declarations failed (it starts at RetryMin and doubles); zero means 1s and 1m.
	RetryMin, RetryMax time.Duration
	// MaxConcurrentPasses bounds the passes that plan and write at once over all clusters. A
	// dark cluster's probe does not take a slot; zero means 32.
	MaxConcurrentPasses int
	// Observe, when set, is told about every pass (metrics).
	Observe func(*ClusterResult)
	// Published, when set, is told the declarations whose result in the cluster changed. It must
	// not block: it is called by the cluster's worker.
	Published func(cluster string, sources []string)
	// Works, when set, says whether this process works the cluster now (hub replicas share the
	// fleet): a worker makes no pass in a cluster another replica works, even if it was handed
	// work just before the cluster moved. It must not block.
	Works func(cluster string) bool
	// TenantBudget is how many objects one tenant's declarations may hold in one cluster (see
	// admit); zero means DefaultTenantBudget.
	TenantBudget int
}

// Workers give every managed cluster one worker that owns it: the state every declaration
// wants there, the passes that bring the cluster to it, the cluster's health, and the latest
// result of each declaration. Handing a worker work never waits for the cluster, so a slow or
// dark cluster delays nobody but itself.
type Workers struct {
	opts   WorkersOptions
	syncer *Syncer
	passes *Slots

	mu      sync.Mutex
	workers map[string]*worker
	closed  bool
	// first are the clusters whose next pass goes before the others waiting (see Inherit).
	first map[string]bool
}

// Result is a declaration's latest result in one cluster.
type Result struct {
	DeclarationResult
	// Token is the token of the wanted state it answers (see Want).
	Token string
	// Wrote is true when the pass created, updated or deleted one of its objects (not a dry-run).
	Wrote bool
	// WroteAt is when a pass last wrote the declaration's objects (zero when none did since the
	// worker started). A pass that writes nothing finds them as last written, whatever the token
	// (tokens change with other clusters' content too): anything Kyverno reports of them from
	// then on is of what the cluster holds now.
	WroteAt time.Time
	// Seq numbers the cluster's passes: a larger Seq is a newer result.
	Seq uint64
}

type wanted struct {
	decl  Declaration
	token string
}

// worker owns one cluster. Its fields are guarded by Workers.mu; run is its only goroutine.
type worker struct {
	cluster Cluster
	wants   map[string]wanted
	results map[string]Result
	// dirty are the declarations the next pass syncs.
	dirty map[string]bool
	// awaiting are, per Synced declaration, its objects Kyverno has not reported ready yet: the
	// watch cache's changes to them make the declaration in force (see ownedChanged).
	awaiting map[string]map[plan.Key]bool
	wake     chan struct{}
	stop     context.CancelFunc
	done     chan struct{}
	seq      uint64
	// unreachable is the error of the last pass when the cluster could not be reached.
	unreachable error
	// failures counts passes in a row that left the cluster unreachable or a declaration
	// failed: the retry backoff's exponent.
	failures int
	// tenants are the wanted declarations of each tenant; refused those its budget refuses here.
	tenants map[string]map[string]bool
	refused map[string]refusal
	// flooded is true when the last pass read the cluster directly, without a cache (see flood).
	flooded bool
}

// NewWorkers returns Workers over a new Syncer made from opts.Sync.
func NewWorkers(opts WorkersOptions) (*Workers, error) {
	if opts.ClusterConfig == nil {
		return nil, errors.New("workers need ClusterConfig: how they reach a cluster")
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = time.Minute
	}
	if opts.MaxConcurrentPasses <= 0 {
		opts.MaxConcurrentPasses = 32
	}
	if opts.TenantBudget <= 0 {
		opts.TenantBudget = DefaultTenantBudget
	}
	ws := &Workers{opts: opts, workers: map[string]*worker{}, first: map[string]bool{}, passes: NewSlots(opts.MaxConcurrentPasses)}
	syncOpts := opts.Sync
	syncOpts.OnOwnedChange = ws.ownedChanged
	syncer, err := NewSyncer(syncOpts)
	if err != nil {
		return nil, err
	}
	ws.syncer = syncer
	return ws, nil
}

// Want hands the cluster's worker what the declaration d wants there, and returns at once.
// token identifies that wanted state: handing the same token again is a no-op, a new token
// makes the worker sync the declaration in its next pass. The cluster's first want starts its
// worker; an error says the cluster cannot be reached at all (no config for it).
func (ws *Workers) Want(cluster string, d Declaration, token string) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil
	}
	w := ws.workers[cluster]
	if w == nil {
		cfg, err := ws.opts.ClusterConfig(cluster)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cluster, err)
		}
		w = ws.start(Cluster{Name: cluster, Config: cfg})
	}
	prev, had := w.wants[d.Source]
	if had && prev.token == token {
		return nil
	}
	w.wants[d.Source] = wanted{decl: d, token: token}
	if !had || prev.decl.Tenant != d.Tenant || !prev.decl.Created.Equal(d.Created) || len(prev.decl.Objects) != len(d.Objects) {
		// What the tenant asks of the cluster changed: its budget is counted again, and the
		// declarations whose admission changed are synced again.
		if d.Tenant != "" {
			if w.tenants[d.Tenant] == nil {
				w.tenants[d.Tenant] = map[string]bool{}
			}
			w.tenants[d.Tenant][d.Source] = true
		}
		if had && prev.decl.Tenant != d.Tenant {
			ws.rebudget(w, prev.decl.Tenant)
		}
		ws.rebudget(w, d.Tenant)
	}
	if r, ok := w.results[d.Source]; ok && had && r.Token == prev.token && sameContent(prev.decl, d) {
		// A new token for the same content (a requested reconcile, an annotation): what is known
		// still holds until the pass below says otherwise, so the status need not go Pending,
		// and a pass that finds nothing new publishes nothing.
		r.Token = token
		w.results[d.Source] = r
	}
	if w.unreachable != nil {
		// A dark cluster answers a new want at once with what is known, and tries again at its
		// next retry: the declaration's status need not wait for it.
		if changed := ws.publishUnreachable(w, []string{d.Source}); len(changed) > 0 && ws.opts.Published != nil {
			ws.opts.Published(cluster, changed)
		}
		w.dirty[d.Source] = true
		return nil
	}
	w.dirty[d.Source] = true
	w.poke()
	return nil
}

// Result returns the declaration's latest result in the cluster, if the worker has one.
func (ws *Workers) Result(cluster, source string) (Result, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.workers[cluster]; w != nil {
		r, ok := w.results[source]
		return r, ok
	}
	return Result{}, false
}

// Drop removes the declaration from the cluster's worker without touching the cluster: it was
// pruned there, or is no longer handled by this hub.
func (ws *Workers) Drop(cluster, source string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.workers[cluster]; w != nil {
		want, had := w.wants[source]
		delete(w.wants, source)
		delete(w.results, source)
		delete(w.dirty, source)
		delete(w.awaiting, source)
		if had {
			ws.rebudget(w, want.decl.Tenant)
		}
	}
	ws.syncer.refusals.forget(cluster, source)
}

// EngineChanged hands the cluster's worker a pass of every declaration wanted there: the
// cluster's engine facts changed (see Options.KyvernoVersion), which may change what its engine
// enforces. It returns at once.
func (ws *Workers) EngineChanged(cluster string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.workers[cluster]
	if w == nil || len(w.wants) == 0 {
		return
	}
	for source := range w.wants {
		w.dirty[source] = true
	}
	if w.unreachable == nil {
		w.poke()
	}
}

// Inherit marks clusters just inherited from a replica that died: their next pass (the one that
// takes over the dead replica's sync Lease and brings them the changes they missed) is let in
// before every other pass waiting for a slot.
func (ws *Workers) Inherit(clusters ...string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for c := range ws.first {
		if ws.opts.Works != nil && !ws.opts.Works(c) {
			delete(ws.first, c) // moved on before its pass: nothing to hurry
		}
	}
	for _, c := range clusters {
		ws.first[c] = true
	}
}

// Forget stops the cluster's worker and drops everything kept for the cluster: its wants and
// results, clients, watch cache and kept Lease (it left the fleet).
func (ws *Workers) Forget(cluster string) {
	ws.mu.Lock()
	w := ws.workers[cluster]
	delete(ws.workers, cluster)
	delete(ws.first, cluster)
	ws.mu.Unlock()
	if w != nil {
		w.stop()
		<-w.done
	}
	ws.syncer.Forget(cluster)
}

// Close stops every worker and gives up the Leases held.
func (ws *Workers) Close() {
	ws.mu.Lock()
	ws.closed = true
	all := ws.workers
	ws.workers = map[string]*worker{}
	ws.mu.Unlock()
	for _, w := range all {
		w.stop()
	}
	for _, w := range all {
		<-w.done
	}
	ws.syncer.Close()
}

// Clusters lists the clusters that have a worker.
func (ws *Workers) Clusters() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	names := make([]string, 0, len(ws.workers))
	for name := range ws.workers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// start makes and starts the cluster's worker; ws.mu is held.
func (ws *Workers) start(cluster Cluster) *worker {
	ctx, stop := context.WithCancel(context.Background())
	w := &worker{
		cluster: cluster, wants: map[string]wanted{}, results: map[string]Result{}, dirty: map[string]bool{}, awaiting: map[string]map[plan.Key]bool{},
		tenants: map[string]map[string]bool{}, refused: map[string]refusal{},
		wake: make(chan struct{}, 1), stop: stop, done: make(chan struct{}),
	}
	ws.workers[cluster.Name] = w
	go ws.run(ctrllog.IntoContext(ctx, ctrllog.Log.WithValues("cluster", cluster.Name)), w)
	return w
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// ownedChanged marks the declaration an owned object came from for a pass when the object no
// longer holds what the declaration wants (drift), or is in a state the hub has not verified
// (a pass asks the cluster: see verify.go), so it is restored within seconds. Changes that match
// what is wanted and verified (the hub's own writes, Kyverno's status) cost nothing.
func (ws *Workers) ownedChanged(cluster string, obj *unstructured.Unstructured, deleted, unverified bool) {
	source := obj.GetAnnotations()[policyhubv1.AnnotationSource]
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.workers[cluster]
	if w == nil || w.unreachable != nil {
		return
	}
	want, ok := w.wants[source]
	if !ok || want.decl.DryRun {
		return
	}
	if _, refused := w.refused[source]; refused {
		// Its objects are not to be here: one that appears is removed.
		if !deleted {
			w.dirty[source] = true
			w.poke()
		}
		return
	}
	key := plan.KeyOf(obj)
	ws.confirmReady(w, source, key, obj, deleted)
	for _, desired := range want.decl.Objects {
		if plan.KeyOf(desired) == key {
			if deleted || unverified || !inSync(desired, obj) {
				w.dirty[source] = true
				w.poke()
			}
			return
		}
	}
	// Not wanted any more: a prune is due only if a pass has not already removed it.
	if !deleted && want.decl.Prune {
		w.dirty[source] = true
		w.poke()
	}
}

// confirmReady takes note that Kyverno reported the declaration's object ready; once it has for
// every object, the declaration is in force in the cluster, and its result says so. ws.mu is held.
func (ws *Workers) confirmReady(w *worker, source string, key plan.Key, obj *unstructured.Unstructured, deleted bool) {
	waiting := w.awaiting[source]
	if !waiting[key] || deleted || !cachedReady(obj) {
		return
	}
	delete(waiting, key)
	if len(waiting) > 0 {
		return
	}
	delete(w.awaiting, source)
	r, ok := w.results[source]
	if !ok || r.Phase != policyhubv1.ClusterPhaseSynced || (r.InForce != nil && *r.InForce) {
		return
	}
	w.seq++
	r.InForce, r.Wrote, r.Seq = ptr.To(true), false, w.seq // nothing new was written: no new Synced Event
	w.results[source] = r
	if ws.opts.Published != nil {
		ws.opts.Published(w.cluster.Name, []string{source})
	}
}

// sameContent reports whether two wanted states of a declaration sync the same: the same
// objects (by key and content hash), dry-run and prune.
func sameContent(a, b Declaration) bool {
	if a.DryRun != b.DryRun || a.Prune != b.Prune || len(a.Objects) != len(b.Objects) {
		return false
	}
	for i := range a.Objects {
		x, y := a.Objects[i], b.Objects[i]
		hash := x.GetAnnotations()[policyhubv1.AnnotationContentHash]
		if hash == "" || plan.KeyOf(x) != plan.KeyOf(y) || hash != y.GetAnnotations()[policyhubv1.AnnotationContentHash] {
			return false
		}
	}
	return true
}

// confirms reports whether next only confirms prev: the same wanted state, Synced before and
// still, and the pass changed nothing there. The kept result goes on saying what the last sync
// that changed something did, and when; so a resync that finds nothing to do changes no status
// nor any slice of per-cluster state.
func confirms(prev, next Result) bool {
	a := next.Actions
	return prev.Token == next.Token && prev.Phase == policyhubv1.ClusterPhaseSynced && next.Phase == policyhubv1.ClusterPhaseSynced &&
		a.Created+a.Updated+a.Deleted+a.Conflict+a.Failed == 0 && a.Unchanged == prev.Actions.Created+prev.Actions.Updated+prev.Actions.Unchanged
}

func equalBool(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// sameResult reports whether next says nothing new over prev.
func sameResult(prev, next Result) bool {
	return prev.Token == next.Token && !next.Wrote && prev.Phase == next.Phase && prev.Message == next.Message &&
		prev.Actions == next.Actions && prev.PlanTruncated == next.PlanTruncated && fmt.Sprint(prev.Plan) == fmt.Sprint(next.Plan)
}
