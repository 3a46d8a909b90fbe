package work

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// FieldManager is the server-side apply field manager of everything policyhub writes.
const FieldManager = "policyhub"

// DefaultMaxOwnedObjects is Options.MaxOwnedObjects' default: far more policies than a cluster
// runs (a library of a hundred, times the namespaces of its applications), about 20 MiB of cache.
const DefaultMaxOwnedObjects = 5000

// requestTimeout bounds every request to a managed cluster but the watch cache's.
const requestTimeout = 30 * time.Second

// PolicyKinds are the Kyverno kinds policyhub may have written in a cluster; the served ones are
// read on every sync so that objects of a kind a declaration no longer renders are still pruned.
// Kinds of PolicyGroups the cluster serves beyond these (a newer Kyverno's, or a rarer one such
// as GlobalContextEntry) are surveyed too (surveyKinds), so no owned object is orphaned.
// PolicyGroups are the API groups a declaration's objects may be of (the FleetPolicy template's
// admission rule says the same).
var PolicyGroups = []string{"kyverno.io", "policies.kyverno.io", policyhubv1.GatekeeperTemplateGroup, policyhubv1.GatekeeperConstraintGroup}

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

// Options configure a Syncer.
type Options struct {
	// HubID is the value of the managed-by label: the objects this hub owns.
	HubID string
	// Lock configures the cluster sync Lease; Lock.Identity is required.
	Lock LockOptions
	// Concurrency bounds the requests in flight to one cluster; zero means 8.
	Concurrency int
	// ProbeTimeout is how long a cluster has to answer before it counts as unreachable; zero
	// means 5s.
	ProbeTimeout time.Duration
	// DiscoveryRecheck is how long an answer of a cluster's discovery about an API group is
	// trusted before a kind or version it lacked is asked about again (Kyverno installed or
	// upgraded meanwhile); zero means 30s.
	DiscoveryRecheck time.Duration
	// MaxOwnedObjects bounds the objects labelled as this hub's that one cluster's watch cache
	// may hold: the label is public, and a cluster admin who puts it on objects by the thousand
	// would otherwise grow the hub until it stops for the whole fleet. Past it the cluster is
	// flooded (see flood): its cache is dropped, and its passes read directly what they need, so
	// it is still synced and pruned. Zero means DefaultMaxOwnedObjects.
	MaxOwnedObjects int
	// FloodRecheck is how often a flooded cluster's owned objects are counted again (at a pass),
	// to make its cache again once they fit; zero means a minute.
	FloodRecheck time.Duration
	// OnOwnedChange, when set, is told about every change the watch caches see to an object this
	// hub owns in a cluster (drift: edited or deleted by someone else, or a write of our own).
	// unverified says the object is in a state the hub has neither written nor verified (see
	// verify.go): only a pass can tell whether it still holds what the hub would apply. It must
	// not block.
	OnOwnedChange func(cluster string, obj *unstructured.Unstructured, deleted, unverified bool)
	// KyvernoVersion, when set, says which Kyverno version a cluster runs, from its engine facts
	// ("" when unknown): a version that no longer executes the legacy kinds makes their
	// declarations NotEnforced there (see legacy.go). It must not block; when its answer for a
	// cluster changes, the caller hands the cluster a pass (Workers.EngineChanged).
	KyvernoVersion func(cluster string) string
}

// Syncer syncs declarations into managed clusters. It keeps one client per cluster.
type Syncer struct {
	opts    Options
	mu      sync.Mutex
	clients map[string]*clusterClients
	// leases remembers foreign Lease records, so a Lease a dead writer left behind expires.
	leases *leaseObserver
	// writers serializes this process's writers per cluster. The Lease keeps writers of different
	// identities apart, but goroutines sharing one identity would all count as its holder, and the
	// first to finish would release the Lease under the others.
	writers map[string]*sync.Mutex
	// specs lets the clusters' watch caches share equal specs.
	specs *specInterner
	// readiness is what the watch caches keep of a policy's status.
	readiness readiness
	// held are the sync Leases kept between a cluster's back-to-back passes (see Workers): one
	// Lease session for a burst of work instead of one per pass.
	held map[string]*heldLease
	// floods are the clusters holding more objects labelled as this hub's than a cache may keep.
	floods map[string]*flood
	// refusals are the declarations' writes Kyverno refused as legacy kinds, per cluster.
	refusals *refusalMemory
}

type clusterClients struct {
	// leaseNamespace is true once the Lease's namespace is known to exist.
	leaseNamespace atomic.Bool
	name           string
	host           string
	client         client.Client
	clientset      kubernetes.Interface
	// cache watches the cluster's policy kinds, so planning costs no request once warm. It may lag
	// the cluster slightly: every write is conditional on the version it was planned from, so a
	// plan the cluster has moved past is refused and redone from a direct read.
	cache cache.Cache
	// names is a metadata cache of every object (anyone's) of the kinds this hub creates in the
	// cluster (see namesOf); nil until the first pass that creates.
	namesMu    sync.Mutex
	names      cache.Cache
	namesStop  context.CancelFunc // stops names and waits until it has stopped
	startNames func(context.Context) (cache.Cache, context.CancelFunc, error)
	stopped    bool
	stopCache  context.CancelFunc
	// mapper answers which kinds the cluster serves (surveyKinds).
	mapper *groupMapper
	// kinds are the policy kinds that may hold this hub's objects (see ownedKinds); nil until
	// surveyed.
	kindsMu sync.Mutex
	kinds   map[schema.GroupKind]bool
	// watched are the kinds whose informer has the owned-change handler; cachedOwned counts the
	// owned objects their informers hold, so a flood is seen as it grows (see watchOwned).
	watched     sync.Map // schema.GroupKind → true
	cachedOwned atomic.Int64
	// verified remembers the owned objects' states known to hold what the hub would apply.
	verified *verifications
	requests atomic.Int64
	writes   atomic.Int64
	dryRuns  atomic.Int64
	// answered is when the cluster last answered the probe.
	answered atomic.Pointer[time.Time]
}

// NewSyncer returns a Syncer for hub opts.HubID.
func NewSyncer(opts Options) (*Syncer, error) {
	if opts.HubID == "" || opts.Lock.Identity == "" {
		return nil, fmt.Errorf("syncer needs a hub id and a lock identity")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = defaultProbeTimeout
	}
	if opts.MaxOwnedObjects <= 0 {
		opts.MaxOwnedObjects = DefaultMaxOwnedObjects
	}
	if opts.FloodRecheck <= 0 {
		opts.FloodRecheck = time.Minute
	}
	if opts.DiscoveryRecheck <= 0 {
		opts.DiscoveryRecheck = 30 * time.Second
	}
	return &Syncer{opts: opts, clients: map[string]*clusterClients{}, writers: map[string]*sync.Mutex{}, leases: newLeaseObserver(), held: map[string]*heldLease{}, specs: newSpecInterner(), readiness: newReadiness(), floods: map[string]*flood{}, refusals: newRefusalMemory()}, nil
}

// Forget drops the client and watch cache of a cluster (it left the fleet, or its endpoint
// changed), and gives up its sync Lease if this process holds it.
//
// A watch cache is never stopped with s.mu held (here and below): stopping one waits for its
// event handlers, and a handler (Workers.ownedChanged) waits for the workers' lock, which a pass
// holds while it reads the Syncer (unconfirmed takes s.mu). Stopping under s.mu deadlocked the
// hub at 1000 clusters when a probe failed while another cluster's pass was publishing.
func (s *Syncer) Forget(cluster string) {
	s.ReleaseLease(cluster)
	s.mu.Lock()
	cc, ok := s.clients[cluster]
	delete(s.clients, cluster)
	delete(s.writers, cluster)
	delete(s.floods, cluster)
	s.leases.forget(cluster)
	s.mu.Unlock()
	s.refusals.forgetCluster(cluster)
	if ok {
		cc.stopCache()
	}
}

// dropClients stops the cluster's watch cache and drops its clients, if they are still cc.
func (s *Syncer) dropClients(cluster string, cc *clusterClients) {
	s.mu.Lock()
	current := s.clients[cluster] == cc
	if current {
		delete(s.clients, cluster)
	}
	s.mu.Unlock()
	if current {
		cc.stopCache()
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
	all := s.clients
	s.clients = map[string]*clusterClients{}
	s.mu.Unlock()
	for _, cc := range all {
		cc.stopCache()
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
	cc := s.clients[cluster]
	s.mu.Unlock()
	if held != nil {
		held.release()
	}
	if cc != nil {
		// The burst of work is over: an idle cluster keeps only its watch cache.
		cc.stopNames()
	}
}

func (s *Syncer) clientsFor(c Cluster) (*clusterClients, error) {
	cc, replaced, err := s.clientsAt(c)
	if replaced != nil {
		replaced.stopCache() // not under s.mu: see Forget
	}
	return cc, err
}

// clientsAt returns the cluster's clients, made for its current address; replaced are the ones
// made for an address it no longer has, to be stopped by the caller.
func (s *Syncer) clientsAt(c Cluster) (_ *clusterClients, replaced *clusterClients, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cc, ok := s.clients[c.Name]; ok {
		if cc.host == c.Config.Host {
			return cc, nil, nil
		}
		delete(s.clients, c.Name)
		replaced = cc
	}
	cc := &clusterClients{name: c.Name, host: c.Config.Host, verified: newVerifications(s.opts.MaxOwnedObjects)}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, cc: cc} })
	// A deprecation warning (e.g. on kyverno.io/v1) comes back with every write of the kind: log
	// each distinct warning once per cluster, not once per object. A request may also collect them
	// (warningCollector).
	cfg.WarningHandlerWithContext = warningCollector{next: ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})}
	// The watch cache's requests are long-lived; every other request gets a deadline, so a cluster
	// that hangs fails its sync instead of holding it (and the declarations waiting on it) forever.
	cacheCfg := rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	// Own HTTP clients, so that letting go of the cluster closes their idle connections (and the
	// goroutines that serve them) at once, not after the transport's idle timeout.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, replaced, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	cacheHTTP, err := rest.HTTPClientFor(cacheCfg)
	if err != nil {
		return nil, replaced, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	if cc.clientset, err = kubernetes.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, replaced, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	mapper := newGroupMapper(cc.clientset.Discovery(), s.opts.DiscoveryRecheck)
	cc.mapper = mapper
	if cc.client, err = client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper}); err != nil {
		return nil, replaced, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	// Plans never read managedFields or status (keepWhatPlansRead): the cache does not keep
	// them. It holds only this hub's objects: what it plans and prunes. Others' objects matter
	// only where one would be created over: the name cache (see namesOf) answers that.
	owned := labels.SelectorFromSet(labels.Set{policyhubv1.LabelManagedBy: s.opts.HubID})
	if cc.cache, err = cache.New(cacheCfg, cache.Options{HTTPClient: cacheHTTP, Mapper: mapper, DefaultLabelSelector: owned, DefaultTransform: s.keepWhatPlansRead}); err != nil {
		return nil, replaced, fmt.Errorf("watch cache for cluster %s: %w", c.Name, err)
	}
	cacheCtx, stopCache := context.WithCancel(context.Background())
	var caches sync.WaitGroup
	// The name cache starts at the first pass that creates: most clusters' passes only update.
	cc.startNames = func(ctx context.Context) (cache.Cache, context.CancelFunc, error) {
		names, err := cache.New(cacheCfg, cache.Options{HTTPClient: cacheHTTP, Mapper: mapper, DefaultTransform: cache.TransformStripManagedFields()})
		if err != nil {
			return nil, nil, fmt.Errorf("name cache for cluster %s: %w", c.Name, err)
		}
		namesCtx, stopNames := context.WithCancel(cacheCtx)
		done := make(chan struct{})
		caches.Go(func() {
			defer close(done)
			if err := names.Start(namesCtx); err != nil {
				ctrllog.Log.Error(err, "name cache stopped", "cluster", c.Name)
			}
		})
		stop := func() { stopNames(); <-done }
		// It reads nothing before it has started; with no informer yet, that is at once.
		if !names.WaitForCacheSync(ctx) {
			stop()
			return nil, nil, fmt.Errorf("name cache for cluster %s did not start: %w", c.Name, ctx.Err())
		}
		return names, stop, nil
	}
	cc.stopCache = func() {
		cc.namesMu.Lock()
		cc.stopped = true // no name cache starts after this
		cc.namesMu.Unlock()
		stopCache()
		caches.Wait()
		httpClient.CloseIdleConnections()
		cacheHTTP.CloseIdleConnections()
	}
	caches.Go(func() {
		if err := cc.cache.Start(cacheCtx); err != nil {
			ctrllog.Log.Error(err, "watch cache stopped", "cluster", c.Name)
		}
	})
	s.clients[c.Name] = cc
	return cc, replaced, nil
}

// namesOf is the cluster's name cache: the metadata of every object (anyone's) of the kinds
// this hub creates there, watched from the first pass that creates one until the cluster's
// worker goes idle (ReleaseLease). A create must not land
// on a same-named object of someone else, which the watch cache (this hub's objects only)
// cannot tell; listing the kind's every name before each pass that creates cost a request and
// up to most of a pass's time (bench-sync).
func (cc *clusterClients) namesOf(ctx context.Context) (cache.Cache, error) {
	cc.namesMu.Lock()
	defer cc.namesMu.Unlock()
	if cc.stopped {
		return nil, fmt.Errorf("cluster %s: its clients were let go of", cc.name)
	}
	if cc.names == nil {
		names, stop, err := cc.startNames(ctx)
		if err != nil {
			return nil, err
		}
		cc.names, cc.namesStop = names, stop
	}
	return cc.names, nil
}

// stopNames stops the name cache, if it runs; the next pass that creates starts it again.
func (cc *clusterClients) stopNames() {
	cc.namesMu.Lock()
	defer cc.namesMu.Unlock()
	if cc.names != nil {
		cc.namesStop()
		cc.names, cc.namesStop = nil, nil
	}
}

// keepWhatPlansRead is the watch caches' transform, since a hub keeps every owned policy of
// every cluster in memory: it drops what no plan reads, managedFields (often the largest part of
// a server-side applied policy; kept while another manager owns fields policyhub does not set)
// and status (Kyverno's, with its autogenerated rules; rendered
// objects never carry one, so none is compared) but for Kyverno's readiness, and shares equal
// specs between clusters.
func (s *Syncer) keepWhatPlansRead(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		s.readiness.keep(u)
		s.specs.intern(u)
		// An object another manager added fields to keeps its managedFields: the plan needs them
		// to find that drift, and the write to remove it (foreignPaths). Only drifted objects
		// pay for them, until restored.
		if paths, err := foreignPaths(u); err != nil || len(paths) > 0 {
			return u, nil
		}
	}
	return cache.TransformStripManagedFields()(in)
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

func (s *Syncer) writer(cluster string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.writers[cluster]
	if !ok {
		w = &sync.Mutex{}
		s.writers[cluster] = w
	}
	return w
}

// countingTransport counts the requests sent to a cluster, and the writes and dry-run writes
// among them.
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
		} else {
			t.cc.dryRuns.Add(1)
		}
	}
	return t.next.RoundTrip(req)
}
