package sync

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// FieldManager is the server-side apply field manager of everything policyhub writes.
const FieldManager = "policyhub"

// requestTimeout bounds every request to a managed cluster but the watch cache's.
const requestTimeout = 30 * time.Second

// PolicyKinds are the Kyverno kinds policyhub may have written in a cluster; the served ones are
// read on every sync so that objects of a kind a declaration no longer renders are still pruned.
var PolicyKinds = []schema.GroupKind{
	{Group: "kyverno.io", Kind: "ClusterPolicy"},
	{Group: "kyverno.io", Kind: "Policy"},
	{Group: "kyverno.io", Kind: "PolicyException"},
	{Group: "kyverno.io", Kind: "ClusterCleanupPolicy"},
	{Group: "kyverno.io", Kind: "CleanupPolicy"},
	{Group: "policies.kyverno.io", Kind: "ValidatingPolicy"},
	{Group: "policies.kyverno.io", Kind: "NamespacedValidatingPolicy"},
	{Group: "policies.kyverno.io", Kind: "MutatingPolicy"},
	{Group: "policies.kyverno.io", Kind: "NamespacedMutatingPolicy"},
	{Group: "policies.kyverno.io", Kind: "GeneratingPolicy"},
	{Group: "policies.kyverno.io", Kind: "NamespacedGeneratingPolicy"},
	{Group: "policies.kyverno.io", Kind: "ImageValidatingPolicy"},
	{Group: "policies.kyverno.io", Kind: "NamespacedImageValidatingPolicy"},
	{Group: "policies.kyverno.io", Kind: "DeletingPolicy"},
	{Group: "policies.kyverno.io", Kind: "NamespacedDeletingPolicy"},
	{Group: "policies.kyverno.io", Kind: "PolicyException"},
}

// Cluster is a managed cluster and the config that reaches it (through the gateway).
type Cluster struct {
	Name   string
	Config *rest.Config
}

// Declaration is what one declaration wants in one cluster.
type Declaration struct {
	// Source identifies the declaration (render.Owner.Source()).
	Source string
	// Objects are its rendered objects for this cluster; none means "nothing here" (prune all).
	Objects []*unstructured.Unstructured
	// DryRun sends the same requests with dryRun=All: admission runs, nothing persists.
	DryRun bool
	// Prune deletes owned objects it no longer renders.
	Prune bool
}

// Options configure a Syncer.
type Options struct {
	// HubID is the value of the managed-by label: the objects this hub owns.
	HubID string
	// Lock configures the cluster sync Lease; Lock.Identity is required.
	Lock LockOptions
	// Concurrency bounds the requests in flight to one cluster; zero means 8.
	Concurrency int
}

// DeclarationResult is the outcome of one declaration in one cluster.
type DeclarationResult struct {
	Source  string
	Phase   policyhubv1.ClusterPhase
	Message string
	Actions policyhubv1.ActionCounts
	// Plan lists the changes of a dry-run (at most 20, with diffs); PlanTruncated counts the rest.
	Plan          []policyhubv1.PlannedChange
	PlanTruncated int32
}

// ClusterResult is the outcome of one sync of one cluster.
type ClusterResult struct {
	Cluster string
	// Declarations, in the order given.
	Declarations []*DeclarationResult
	// Requests counts the requests sent to the cluster; Writes those that persisted something
	// (mutating and not dry-run), the Lease's included.
	Requests, Writes int64
	Duration         time.Duration
	// ReadTime, LockTime and WriteTime split Duration: reading the cluster, waiting for and
	// taking its Lease, writing (dry-runs included).
	ReadTime, LockTime, WriteTime time.Duration
	// Err is set when the cluster could not be read at all (unreachable, refused credentials).
	Err error
}

// Syncer syncs declarations into managed clusters. It keeps one client per cluster.
type Syncer struct {
	opts    Options
	mu      gosync.Mutex
	clients map[string]*clusterClients
	// leases remembers foreign Lease records, so a Lease a dead writer left behind expires.
	leases *leaseObserver
	// writers serializes this process's writers per cluster. The Lease keeps writers of different
	// identities apart, but goroutines sharing one identity would all count as its holder, and the
	// first to finish would release the Lease under the others.
	writers map[string]*gosync.Mutex
	// held are the sync Leases kept between a cluster's back-to-back passes (see Batcher): one
	// Lease session for a burst of work instead of one per pass.
	held map[string]*heldLease
}

type clusterClients struct {
	// leaseNamespace is true once the Lease's namespace is known to exist.
	leaseNamespace atomic.Bool
	host           string
	client         client.Client
	clientset      kubernetes.Interface
	// cache watches the cluster's policy kinds, so planning costs no request once warm. It may lag
	// the cluster slightly: every write is conditional on the version it was planned from, so a
	// plan the cluster has moved past is refused and redone from a direct read.
	cache     cache.Cache
	stopCache context.CancelFunc
	requests  atomic.Int64
	writes    atomic.Int64
}

// NewSyncer returns a Syncer for hub opts.HubID.
func NewSyncer(opts Options) (*Syncer, error) {
	if opts.HubID == "" || opts.Lock.Identity == "" {
		return nil, fmt.Errorf("syncer needs a hub id and a lock identity")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	return &Syncer{opts: opts, clients: map[string]*clusterClients{}, writers: map[string]*gosync.Mutex{}, leases: newLeaseObserver(), held: map[string]*heldLease{}}, nil
}

// Forget drops the client and watch cache of a cluster (it left the fleet, or its endpoint
// changed), and gives up its sync Lease if this process holds it.
func (s *Syncer) Forget(cluster string) {
	s.ReleaseLease(cluster)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cc, ok := s.clients[cluster]; ok {
		cc.stopCache()
		delete(s.clients, cluster)
	}
}

// Close gives up the sync Leases this process holds and stops every cluster's watch cache.
func (s *Syncer) Close() {
	s.mu.Lock()
	held := s.held
	s.held = map[string]*heldLease{}
	s.mu.Unlock()
	for _, h := range held {
		h.release()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, cc := range s.clients {
		cc.stopCache()
		delete(s.clients, name)
	}
}

// ReleaseLease gives up the cluster's sync Lease kept by SyncKeepingLease, if any. It waits for a
// sync of the cluster in progress, so the Lease is never given up under one.
func (s *Syncer) ReleaseLease(cluster string) {
	writer := s.writer(cluster)
	writer.Lock()
	defer writer.Unlock()
	s.mu.Lock()
	held := s.held[cluster]
	delete(s.held, cluster)
	s.mu.Unlock()
	if held != nil {
		held.release()
	}
}

func (s *Syncer) clientsFor(c Cluster) (*clusterClients, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cc, ok := s.clients[c.Name]; ok {
		if cc.host == c.Config.Host {
			return cc, nil
		}
		cc.stopCache()
	}
	cc := &clusterClients{host: c.Config.Host}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, cc: cc} })
	// A deprecation warning (e.g. on kyverno.io/v1) comes back with every write of the kind: log
	// each distinct warning once per cluster, not once per object.
	cfg.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})
	// The watch cache's requests are long-lived; every other request gets a deadline, so a cluster
	// that hangs fails its sync instead of holding it (and the declarations waiting on it) forever.
	cacheCfg := rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	var err error
	if cc.client, err = client.New(cfg, client.Options{}); err != nil {
		return nil, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	if cc.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	// Plans never read managedFields, often the largest part of a server-side applied policy:
	// the cache does not keep them.
	if cc.cache, err = cache.New(cacheCfg, cache.Options{Mapper: cc.client.RESTMapper(), DefaultTransform: cache.TransformStripManagedFields()}); err != nil {
		return nil, fmt.Errorf("watch cache for cluster %s: %w", c.Name, err)
	}
	cacheCtx, stop := context.WithCancel(context.Background())
	cc.stopCache = stop
	go func() { _ = cc.cache.Start(cacheCtx) }()
	s.clients[c.Name] = cc
	return cc, nil
}

// underLease runs work under the cluster's sync Lease (see WithLock); the caller holds the
// cluster's writer mutex. A Lease kept from an earlier pass is used as it is: no other writer can
// have held it since. With keep, the Lease stays held after work (renewed in the background) until
// ReleaseLease; otherwise a Lease taken here is given up when work returns.
func (s *Syncer) underLease(ctx context.Context, cc *clusterClients, cluster string, keep bool, work func(context.Context, Session) error) error {
	s.mu.Lock()
	held := s.held[cluster]
	s.mu.Unlock()
	session := Session{Alone: true}
	if held != nil && held.lost() {
		// Not renewed in time: another writer may have taken it since.
		held.release()
		s.mu.Lock()
		delete(s.held, cluster)
		s.mu.Unlock()
		held = nil
	}
	if held == nil {
		opts := s.opts.Lock
		opts.namespaceExists = cc.leaseNamespace.Load()
		opts.observer = s.leases
		taken, err := acquire(ctx, cc.clientset, cluster, opts)
		if err == nil || IsLockHeld(err) {
			cc.leaseNamespace.Store(true)
		}
		if err != nil {
			return err
		}
		held, session = taken, taken.session
		if keep {
			s.mu.Lock()
			s.held[cluster] = held
			s.mu.Unlock()
		} else {
			defer held.release()
		}
	}
	workCtx, cancel := held.within(ctx)
	defer cancel()
	return work(workCtx, session)
}

func (s *Syncer) writer(cluster string) *gosync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.writers[cluster]
	if !ok {
		w = &gosync.Mutex{}
		s.writers[cluster] = w
	}
	return w
}

// countingTransport counts the requests sent to a cluster and the writes among them.
type countingTransport struct {
	next http.RoundTripper
	cc   *clusterClients
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.cc.requests.Add(1)
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if req.URL.Query().Get("dryRun") == "" {
			t.cc.writes.Add(1)
		}
	}
	return t.next.RoundTrip(req)
}

// Sync makes the cluster hold what the declarations want. It reads first and writes only when
// something differs: a resync with nothing changed sends reads and persists nothing, not even the
// Lease. Real writes happen under the cluster's sync Lease, conditional on what they were planned
// from; dry-run declarations send their requests with dryRun=All and need no Lease. A failure is
// reported per declaration; Sync itself never fails.
func (s *Syncer) Sync(ctx context.Context, cluster Cluster, decls []Declaration) *ClusterResult {
	return s.sync(ctx, cluster, decls, false)
}

// SyncKeepingLease is Sync, except that a sync Lease it takes stays held (renewed in the
// background) after it returns, until ReleaseLease: back-to-back syncs of a cluster then share one
// Lease session. Other writers wait meanwhile, so the caller releases it as soon as it has no
// more work for the cluster.
func (s *Syncer) SyncKeepingLease(ctx context.Context, cluster Cluster, decls []Declaration) *ClusterResult {
	return s.sync(ctx, cluster, decls, true)
}

func (s *Syncer) sync(ctx context.Context, cluster Cluster, decls []Declaration, keepLease bool) *ClusterResult {
	start := time.Now()
	res := &ClusterResult{Cluster: cluster.Name}
	for _, d := range decls {
		res.Declarations = append(res.Declarations, &DeclarationResult{Source: d.Source, Phase: policyhubv1.ClusterPhasePending})
	}
	cc, err := s.clientsFor(cluster)
	if err != nil {
		res.Err = err
		res.fail(nil, err)
		return res
	}
	requests0, writes0 := cc.requests.Load(), cc.writes.Load()
	defer func() {
		res.Requests, res.Writes = cc.requests.Load()-requests0, cc.writes.Load()-writes0
		res.Duration = time.Since(start)
		logSync(ctx, res)
	}()

	// Capability: a declaration with a kind the cluster does not serve is Unsupported; nothing of it is sent.
	active := make([]int, 0, len(decls))
	for i, d := range decls {
		if missing, err := s.unserved(cc, d.Objects); err != nil {
			res.Err = fmt.Errorf("cluster %s: discovery: %w", cluster.Name, err)
			res.fail([]int{i}, res.Err)
		} else if len(missing) > 0 {
			r := res.Declarations[i]
			r.Phase = policyhubv1.ClusterPhaseUnsupported
			r.Message = fmt.Sprintf("cluster %s does not serve %s: install or upgrade Kyverno to a version that serves it; nothing was sent",
				cluster.Name, strings.Join(missing, ", "))
		} else {
			active = append(active, i)
		}
	}
	if len(active) == 0 {
		return res
	}

	readStart := time.Now()
	// One cheap request tells a dead cluster apart from a cache that has not noticed yet.
	if err := cc.clientset.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		res.Err = fmt.Errorf("cluster %s: unreachable: %w", cluster.Name, err)
		res.fail(active, res.Err)
		return res
	}
	work, err := s.plan(ctx, cc, decls, active, nil, nil, true)
	res.ReadTime += time.Since(readStart)
	if err != nil {
		res.Err = fmt.Errorf("cluster %s: read live policies: %w", cluster.Name, err)
		res.fail(active, res.Err)
		return res
	}
	var dryRun, real []int
	for _, i := range active {
		switch {
		case decls[i].DryRun:
			dryRun = append(dryRun, i)
		case work.needsWrite(i):
			real = append(real, i)
		default:
			res.record(i, work, false)
		}
	}
	writeStart := time.Now()
	s.write(ctx, cc, work, dryRun, true)
	res.WriteTime += time.Since(writeStart)
	for _, i := range dryRun {
		res.record(i, work, true)
	}
	if len(real) == 0 {
		return res
	}
	lockStart := time.Now()
	writer := s.writer(cluster.Name)
	writer.Lock()
	defer writer.Unlock()
	err = s.underLease(ctx, cc, cluster.Name, keepLease, func(ctx context.Context, session Session) error {
		res.LockTime += time.Since(lockStart)
		// Another writer held the Lease since this process did: the cache may not have its
		// writes yet, so the kinds about to be written are read again. Otherwise the cache's
		// plan stands: every write carries the version it was planned from (see Apply), so
		// a plan the cluster has moved past is refused, never applied.
		if !session.Alone {
			if err := s.replan(ctx, cc, decls, real, work, res); err != nil {
				return err
			}
		}
		writeStart := time.Now()
		s.write(ctx, cc, work, real, false)
		res.WriteTime += time.Since(writeStart)
		// Writes refused because the object changed since it was read: read again and redo
		// those declarations, once; a second refusal is reported and retried later.
		if refused := work.refused(real); len(refused) > 0 {
			if err := s.replan(ctx, cc, decls, refused, work, res); err != nil {
				return err
			}
			writeStart := time.Now()
			s.write(ctx, cc, work, refused, false)
			res.WriteTime += time.Since(writeStart)
		}
		return nil
	})
	switch {
	case IsLockHeld(err):
		for _, i := range real {
			r := res.Declarations[i]
			r.Phase, r.Message = policyhubv1.ClusterPhaseLockHeld, err.Error()
		}
	case err != nil:
		res.fail(real, err)
	default:
		for _, i := range real {
			res.record(i, work, false)
		}
	}
	return res
}

// replan reads the cluster directly (not from the cache) for the kinds the declarations of
// indexes which would write, and replaces their plan in work.
func (s *Syncer) replan(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, work *workPlan, res *ClusterResult) error {
	readStart := time.Now()
	fresh, err := s.plan(ctx, cc, decls, which, work.kindsWritten(which), work.live, false)
	res.ReadTime += time.Since(readStart)
	if err != nil {
		return fmt.Errorf("cluster %s: read live policies: %w", res.Cluster, err)
	}
	work.replace(which, fresh)
	return nil
}

// unserved lists the kinds of objs the cluster does not serve.
func (s *Syncer) unserved(cc *clusterClients, objs []*unstructured.Unstructured) ([]string, error) {
	var missing []string
	seen := map[schema.GroupVersionKind]bool{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		if _, err := cc.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				missing = append(missing, gvk.GroupVersion().String()+" "+gvk.Kind)
				continue
			}
			return nil, err
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// change is one object's planned action in a sync.
type change struct {
	decl    int
	action  string // Create, Update, Unchanged, Delete, Conflict
	desired *unstructured.Unstructured
	live    *unstructured.Unstructured
	message string
	diff    string
	err     error
}

type workPlan struct {
	changes []*change
	// live is what the plan was made from, by kind.
	live map[schema.GroupKind][]*unstructured.Unstructured
}

// kindsWritten are the kinds the declarations of indexes which would create, update, delete or
// find in conflict.
func (w *workPlan) kindsWritten(which []int) map[schema.GroupKind]bool {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	kinds := map[schema.GroupKind]bool{}
	for _, c := range w.changes {
		if !selected[c.decl] || c.action == "Unchanged" {
			continue
		}
		obj := c.desired
		if obj == nil {
			obj = c.live
		}
		kinds[obj.GroupVersionKind().GroupKind()] = true
	}
	return kinds
}

// replace swaps the changes of the declarations of indexes which for other's (a fresher plan of
// them) and takes other's reads of the kinds it read.
func (w *workPlan) replace(which []int, other *workPlan) {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	kept := w.changes[:0]
	for _, c := range w.changes {
		if !selected[c.decl] {
			kept = append(kept, c)
		}
	}
	w.changes = append(kept, other.changes...)
	for gk, objs := range other.live {
		w.live[gk] = objs
	}
}

// refused lists the declarations of indexes which with a write the cluster refused as a conflict:
// the object changed since it was read, or a create met an object another manager owns.
func (w *workPlan) refused(which []int) []int {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	var out []int
	for _, c := range w.changes {
		if selected[c.decl] && apierrors.IsConflict(c.err) {
			out = append(out, c.decl)
			delete(selected, c.decl)
		}
	}
	sort.Ints(out)
	return out
}

func (w *workPlan) needsWrite(decl int) bool {
	for _, c := range w.changes {
		if c.decl == decl && (c.action == "Create" || c.action == "Update" || c.action == "Delete") {
			return true
		}
	}
	return false
}

// plan reads the cluster's policies (from the watch cache when cached) and plans the declarations
// of indexes which. With only set, just those kinds are read again and the others are taken from
// previous.
func (s *Syncer) plan(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, only map[schema.GroupKind]bool, previous map[schema.GroupKind][]*unstructured.Unstructured, cached bool) (*workPlan, error) {
	byKind, err := s.readLive(ctx, cc, decls, which, only, cached)
	if err != nil {
		return nil, err
	}
	if !cached {
		if err := s.upgradeFromPrevious(ctx, cc, byKind, previous); err != nil {
			return nil, err
		}
	}
	for gk, objs := range previous {
		if _, reread := byKind[gk]; !reread && !only[gk] {
			byKind[gk] = objs
		}
	}
	var live []*unstructured.Unstructured
	for _, objs := range byKind {
		live = append(live, objs...)
	}
	index := plan.NewLive(s.opts.HubID, live)
	w := &workPlan{live: byKind}
	// Two declarations rendering the same object: the first (by source) keeps it, the other is a Conflict.
	claimed := map[plan.Key]string{}
	order := append([]int(nil), which...)
	sort.Slice(order, func(a, b int) bool { return decls[order[a]].Source < decls[order[b]].Source })
	for _, i := range order {
		d := decls[i]
		p := index.Make(d.Source, d.Objects, d.Prune)
		for _, obj := range p.Apply {
			key := plan.KeyOf(obj)
			if other, taken := claimed[key]; taken {
				w.changes = append(w.changes, &change{decl: i, action: "Conflict", desired: obj,
					message: fmt.Sprintf("%s is also rendered by %s, which keeps it; it is left untouched", key, other)})
				continue
			}
			claimed[key] = d.Source
			c := &change{decl: i, desired: obj, live: index.Get(key)}
			switch {
			case c.live == nil:
				c.action = "Create"
			case inSync(obj, c.live):
				c.action = "Unchanged"
			default:
				c.action = "Update"
			}
			w.changes = append(w.changes, c)
		}
		for _, conflict := range p.Conflicts {
			w.changes = append(w.changes, &change{decl: i, action: "Conflict", desired: conflict.Desired, live: index.Get(plan.KeyOf(conflict.Desired)), message: conflict.Reason})
		}
		for _, obj := range p.Delete {
			w.changes = append(w.changes, &change{decl: i, action: "Delete", live: obj})
		}
	}
	return w, nil
}

// readLive lists, per served policy kind, the objects the declarations may touch: every object of
// the kinds they render (to find same-named objects policyhub does not own), and this hub's
// objects of the other kinds (to prune). With only set, just those kinds are listed. The lists
// run in parallel.
func (s *Syncer) readLive(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, only map[schema.GroupKind]bool, cached bool) (map[schema.GroupKind][]*unstructured.Unstructured, error) {
	rendered := map[schema.GroupKind]schema.GroupVersionKind{}
	for _, i := range which {
		for _, obj := range decls[i].Objects {
			rendered[obj.GroupVersionKind().GroupKind()] = obj.GroupVersionKind()
		}
	}
	kinds := map[schema.GroupKind]bool{} // kind → list every object (not only ours)
	for gk := range rendered {
		kinds[gk] = true
	}
	for _, gk := range PolicyKinds {
		if _, ok := kinds[gk]; !ok {
			kinds[gk] = false
		}
	}
	var (
		mu    gosync.Mutex
		wg    gosync.WaitGroup
		first error
		out   = map[schema.GroupKind][]*unstructured.Unstructured{}
		sem   = make(chan struct{}, s.opts.Concurrency)
	)
	for gk, all := range kinds {
		if only != nil && !only[gk] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Cached reads cost no request (the first one fills the kind's cache, and all kinds
			// fill at once); direct lists are bounded like any request.
			if !cached {
				sem <- struct{}{}
				defer func() { <-sem }()
			}
			objs, err := s.listKind(ctx, cc, gk, rendered, all, cached)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if objs != nil {
				out[gk] = objs
			}
		}()
	}
	wg.Wait()
	return out, first
}

// upgradeFromPrevious replaces the metadata-only objects of a direct read with full objects: the
// earlier (cached) read's when it has the same version, else a fresh GET. Only objects of this
// hub need content (to tell drift); the others only need their metadata.
func (s *Syncer) upgradeFromPrevious(ctx context.Context, cc *clusterClients, byKind, previous map[schema.GroupKind][]*unstructured.Unstructured) error {
	for gk, objs := range byKind {
		full := map[string]*unstructured.Unstructured{}
		for _, obj := range previous[gk] {
			full[obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
		for i, obj := range objs {
			if prev, ok := full[obj.GetNamespace()+"/"+obj.GetName()]; ok && prev.GetResourceVersion() == obj.GetResourceVersion() {
				objs[i] = prev
				continue
			}
			if obj.GetLabels()[policyhubv1.LabelManagedBy] != s.opts.HubID {
				continue
			}
			fresh := &unstructured.Unstructured{}
			fresh.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cc.client.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				if apierrors.IsNotFound(err) {
					continue // deleted meanwhile: planned from its metadata, the delete is a no-op
				}
				return fmt.Errorf("get %s %s: %w", gk, obj.GetName(), err)
			}
			objs[i] = fresh
		}
	}
	return nil
}

// listKind lists one kind; nil without error when the cluster does not serve it. A direct read
// (cached false) lists metadata only: it decides ownership and existence, which metadata carries.
func (s *Syncer) listKind(ctx context.Context, cc *clusterClients, gk schema.GroupKind, rendered map[schema.GroupKind]schema.GroupVersionKind, all, cached bool) ([]*unstructured.Unstructured, error) {
	mapping, err := cc.client.RESTMapper().RESTMapping(gk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // not served: nothing of this kind can exist
		}
		return nil, err
	}
	gvk := mapping.GroupVersionKind
	if want, ok := rendered[gk]; ok {
		gvk = want
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.MatchingLabels{policyhubv1.LabelManagedBy: s.opts.HubID})
	}
	if !cached {
		metaList := &metav1.PartialObjectMetadataList{}
		metaList.SetGroupVersionKind(list.GroupVersionKind())
		if err := cc.client.List(ctx, metaList, opts...); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("list %s: %w", gk, err)
		}
		objs := make([]*unstructured.Unstructured, 0, len(metaList.Items))
		for i := range metaList.Items {
			m := &metaList.Items[i]
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			obj.SetNamespace(m.Namespace)
			obj.SetName(m.Name)
			obj.SetUID(m.UID)
			obj.SetResourceVersion(m.ResourceVersion)
			obj.SetLabels(m.Labels)
			obj.SetAnnotations(m.Annotations)
			objs = append(objs, obj)
		}
		return objs, nil
	}
	// The first read of a kind waits for its cache to fill; a cluster that stops answering
	// meanwhile must not hold the sync up for long.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The cache's own objects, not copies: a plan only reads them (diffs copy before trimming),
	// and copying every policy of the cluster on every pass cost a third of the hub's CPU.
	if err := cc.cache.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", gk, err)
	}
	objs := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return objs, nil
}

// write sends the changes of the declarations of indexes which, dryRun=All when dryRun.
func (s *Syncer) write(ctx context.Context, cc *clusterClients, w *workPlan, which []int, dryRun bool) {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	sem := make(chan struct{}, s.opts.Concurrency)
	var wg gosync.WaitGroup
	for _, c := range w.changes {
		if !selected[c.decl] {
			continue
		}
		switch c.action {
		case "Create", "Update", "Delete":
		default:
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.writeOne(ctx, cc, c, dryRun)
		}()
	}
	wg.Wait()
}

func (s *Syncer) writeOne(ctx context.Context, cc *clusterClients, c *change, dryRun bool) {
	if c.action == "Delete" {
		// Preconditions: never delete an object re-created, or changed since it was read (a
		// dry-run previews the delete of the object as read, whatever its version now).
		uid, version := c.live.GetUID(), c.live.GetResourceVersion()
		preconditions := client.Preconditions{UID: &uid, ResourceVersion: &version}
		if dryRun {
			preconditions.ResourceVersion = nil
		}
		deleteOpts := []client.DeleteOption{preconditions}
		if dryRun {
			deleteOpts = append(deleteOpts, client.DryRunAll)
		}
		c.err = client.IgnoreNotFound(cc.client.Delete(ctx, c.live.DeepCopy(), deleteOpts...))
		if dryRun && c.err == nil {
			c.diff = diff(c.live, nil)
		}
		return
	}
	applied, err := Apply(ctx, cc.client, c.desired, c.live, dryRun)
	c.err = err
	if dryRun && c.err == nil {
		c.diff = diff(c.live, applied)
	}
}

// Apply server-side applies desired as policyhub, on condition that the object is still as it was
// read (live; nil when it was absent). A plan made from a watch cache that lagged the cluster is
// thus refused with a Conflict (apierrors.IsConflict) rather than applied over a state nobody
// checked:
//   - an update carries live's resourceVersion, and forces ownership: restoring fields edited in
//     the cluster is the point;
//   - a create does not force: should an object of that name have appeared since the read, the
//     fields its own managers set differently conflict instead of being taken over. (The API has
//     no create-only apply: one that appeared holding exactly the same values would be merged.)
//
// Dry-run applies are unconditional, as previews of the write. The object returned is the
// cluster's answer: the object as applied (or as it would be, for a dry-run).
func Apply(ctx context.Context, c client.Client, desired, live *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	applied := desired.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	switch {
	case dryRun:
		opts = append(opts, client.ForceOwnership, client.DryRunAll)
	case live != nil:
		applied.SetResourceVersion(live.GetResourceVersion())
		opts = append(opts, client.ForceOwnership)
	}
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), opts...)
	return applied, err
}

// maxPlan is how many changes a dry-run keeps in status per cluster (the API's limit).
const maxPlan = 20

// record fills declaration i's result from the plan.
func (r *ClusterResult) record(i int, w *workPlan, dryRun bool) {
	res := r.Declarations[i]
	var failures, conflicts []string
	for _, c := range w.changes {
		if c.decl != i {
			continue
		}
		obj := c.desired
		if obj == nil {
			obj = c.live
		}
		entry := policyhubv1.PlannedChange{
			Action: c.action, APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), Diff: c.diff, Message: c.message,
		}
		switch {
		case c.err != nil:
			res.Actions.Failed++
			entry.Action, entry.Message = "Failed", truncate(c.err.Error(), 1024)
			failures = append(failures, fmt.Sprintf("%s: %v", plan.KeyOf(obj), c.err))
		case c.action == "Create":
			res.Actions.Created++
		case c.action == "Update":
			res.Actions.Updated++
		case c.action == "Delete":
			res.Actions.Deleted++
		case c.action == "Unchanged":
			res.Actions.Unchanged++
		case c.action == "Conflict":
			res.Actions.Conflict++
			conflicts = append(conflicts, c.message)
		}
		if dryRun && entry.Action != "Unchanged" {
			if len(res.Plan) < maxPlan {
				res.Plan = append(res.Plan, entry)
			} else {
				res.PlanTruncated++
			}
		}
	}
	a := res.Actions
	counts := fmt.Sprintf("created %d, updated %d, deleted %d, unchanged %d", a.Created, a.Updated, a.Deleted, a.Unchanged)
	switch {
	case len(failures) > 0:
		res.Phase, res.Message = policyhubv1.ClusterPhaseFailed, firstOf(failures)+" ("+counts+")"
	case len(conflicts) > 0:
		res.Phase, res.Message = policyhubv1.ClusterPhaseConflict, firstOf(conflicts)
	case dryRun:
		res.Phase = policyhubv1.ClusterPhaseDryRun
		res.Message = fmt.Sprintf("dry-run, nothing was persisted: would create %d, update %d, delete %d; %d unchanged", a.Created, a.Updated, a.Deleted, a.Unchanged)
	default:
		res.Phase, res.Message = policyhubv1.ClusterPhaseSynced, counts
	}
}

// fail marks the declarations of indexes which (all when nil) Failed with err.
func (r *ClusterResult) fail(which []int, err error) {
	if which == nil {
		for i := range r.Declarations {
			which = append(which, i)
		}
	}
	for _, i := range which {
		res := r.Declarations[i]
		res.Phase, res.Message = policyhubv1.ClusterPhaseFailed, truncate(err.Error(), 2048)
	}
}

func firstOf(msgs []string) string {
	if len(msgs) == 1 {
		return truncate(msgs[0], 1900)
	}
	return truncate(msgs[0], 1900) + fmt.Sprintf(" (and %d more)", len(msgs)-1)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// logSync writes the one log line per cluster sync, with the counts.
func logSync(ctx context.Context, res *ClusterResult) {
	var total policyhubv1.ActionCounts
	phases := map[policyhubv1.ClusterPhase]int{}
	for _, d := range res.Declarations {
		total.Created += d.Actions.Created
		total.Updated += d.Actions.Updated
		total.Deleted += d.Actions.Deleted
		total.Failed += d.Actions.Failed
		total.Unchanged += d.Actions.Unchanged
		total.Conflict += d.Actions.Conflict
		phases[d.Phase]++
	}
	log.FromContext(ctx).Info(fmt.Sprintf("applied %d, updated %d, removed %d, failed %d, unchanged %d, conflicts %d",
		total.Created, total.Updated, total.Deleted, total.Failed, total.Unchanged, total.Conflict),
		"cluster", res.Cluster, "declarations", len(res.Declarations), "phases", phases,
		"requests", res.Requests, "writes", res.Writes, "duration", res.Duration.Round(time.Millisecond).String(),
		"read", res.ReadTime.Round(time.Millisecond).String(), "lock", res.LockTime.Round(time.Millisecond).String(),
		"write", res.WriteTime.Round(time.Millisecond).String())
}
