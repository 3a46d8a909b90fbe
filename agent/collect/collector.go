package collect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent/dryruns"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// ReportKinds are the report APIs the collector reads when the cluster serves them.
var ReportKinds = []schema.GroupVersionResource{
	{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"},
	{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"},
	{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"},
	{Group: "openreports.io", Version: "v1alpha1", Resource: "clusterreports"},
}

// PolicyKind is a Kyverno policy kind, read at the first of Versions the cluster serves.
type PolicyKind struct {
	schema.GroupResource
	Kind     string
	Versions []string
}

// celVersions are the versions of Kyverno's CEL policy kinds, newest first: v1 from Kyverno 1.17,
// v1beta1 only in 1.16 (also served, same schema, in 1.17 to 1.19).
var celVersions = []string{"v1", "v1beta1"}

// PolicyKinds are the Kyverno policy kinds whose annotations (title, category, severity) the
// collector reads when the cluster serves them.
var PolicyKinds = []PolicyKind{
	{schema.GroupResource{Group: "kyverno.io", Resource: "clusterpolicies"}, "ClusterPolicy", []string{"v1"}},
	{schema.GroupResource{Group: "kyverno.io", Resource: "policies"}, "Policy", []string{"v1"}},
	{schema.GroupResource{Group: "policies.kyverno.io", Resource: "validatingpolicies"}, "ValidatingPolicy", celVersions},
	{schema.GroupResource{Group: "policies.kyverno.io", Resource: "namespacedvalidatingpolicies"}, "NamespacedValidatingPolicy", celVersions},
	{schema.GroupResource{Group: "policies.kyverno.io", Resource: "imagevalidatingpolicies"}, "ImageValidatingPolicy", celVersions},
	{schema.GroupResource{Group: "policies.kyverno.io", Resource: "namespacedimagevalidatingpolicies"}, "NamespacedImageValidatingPolicy", celVersions},
}

// Kyverno's policy annotations a summary shows.
const (
	annotationTitle    = "policies.kyverno.io/title"
	annotationCategory = "policies.kyverno.io/category"
	annotationSeverity = "policies.kyverno.io/severity"
)

// kyvernoWebhookLabel marks the webhook configurations Kyverno registers.
const kyvernoWebhookLabel = "webhook.kyverno.io/managed-by"

// Options configure a Collector.
type Options struct {
	// ApplicationLabel is the label whose value names a resource's application; empty means
	// app.oam.dev/name (KubeVela's).
	ApplicationLabel string
	// DiscoveryInterval is how often the served report and policy APIs are checked again, so
	// APIs installed after start are read too; zero means 30s.
	DiscoveryInterval time.Duration
	// KyvernoNamespace is where Kyverno's controllers' Deployments are (its Helm chart's
	// namespace); empty means kyverno.
	KyvernoNamespace string
	// GatekeeperNamespace is where Gatekeeper's Deployment is (its release's namespace); empty
	// means gatekeeper-system.
	GatekeeperNamespace string
	// KyvernoMetricsURLs are the admission controller's metrics endpoints, one per replica;
	// empty means its Pods' in KyvernoNamespace (dryruns.PodURLs).
	KyvernoMetricsURLs []string
	// Sources add other engines' results to every snapshot (see Source).
	Sources []Source
}

// Collector keeps digests of a cluster's reports, blocked admissions, policies and application
// labels, each from an informer whose transform drops everything else before it is stored.
type Collector struct {
	opts Options
	// reportClients read the reports, typed.
	reportClients *reportClients
	metadata      metadata.Interface
	clientset     kubernetes.Interface
	discovery     discovery.CachedDiscoveryInterface
	mapper        meta.ResettableRESTMapper

	changed chan struct{}

	mu       sync.Mutex
	ctx      context.Context
	reports  map[schema.GroupVersionResource]cache.SharedIndexInformer
	policies map[schema.GroupResource]*policyInformer
	events   cache.SharedIndexInformer
	webhooks bool
	served   []string
	// discovered is set once the served APIs were looked up (and their informers started).
	discovered bool
	// engine watches Kyverno's Deployments and the legacy objects (engine.go).
	engine engineWatch
	// gatekeeper watches Gatekeeper's Constraints and facts (gatekeeper.go).
	gatekeeper gatekeeperWatch
	// dryRuns counts the dry-runs among Kyverno's refusals (dryruns.go).
	dryRuns *dryruns.Counter
	// now is the clock of the dry-run window.
	now func() time.Time

	// appsMu guards apps apart from mu: report transforms start application informers from the
	// informers' goroutines, while mu may be held.
	appsMu sync.Mutex
	apps   map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// New returns a Collector for the cluster cfg reaches.
func New(cfg *rest.Config, opts Options) (*Collector, error) {
	// Kyverno's deprecation warnings come with every list of its v1 kinds: log each once.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{Deduplicate: true})
	reports, err := newReportClients(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := newCollector(opts, reports, md, clientset, clientset.Discovery())
	if c.gatekeeper.client, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// newCollector returns a Collector reading through the given clients (fakes, in tests).
func newCollector(opts Options, reports *reportClients, md metadata.Interface, clientset kubernetes.Interface, d discovery.DiscoveryInterface) *Collector {
	if opts.ApplicationLabel == "" {
		opts.ApplicationLabel = "app.oam.dev/name"
	}
	if opts.DiscoveryInterval == 0 {
		opts.DiscoveryInterval = 30 * time.Second
	}
	if opts.KyvernoNamespace == "" {
		opts.KyvernoNamespace = "kyverno"
	}
	c := &Collector{
		opts:          opts,
		reportClients: reports,
		metadata:      md,
		clientset:     clientset,
		discovery:     memory.NewMemCacheClient(d),
		changed:       make(chan struct{}, 1),
		reports:       map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		policies:      map[schema.GroupResource]*policyInformer{},
		apps:          map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		dryRuns:       dryruns.NewCounter(),
		now:           time.Now,
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(c.discovery)
	return c
}

// Changed is signalled (coalesced) whenever what the collector knows may have changed.
func (c *Collector) Changed() <-chan struct{} { return c.changed }

func (c *Collector) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Run starts the informers and checks the served APIs every DiscoveryInterval until ctx ends.
func (c *Collector) Run(ctx context.Context) error {
	c.mu.Lock()
	c.appsMu.Lock()
	c.ctx = ctx // read under either lock
	c.appsMu.Unlock()
	c.events = c.newInformer(ctx, c.clientset, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("reason", "PolicyViolation").String()
			return c.clientset.CoreV1().Events("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("reason", "PolicyViolation").String()
			return c.clientset.CoreV1().Events("").Watch(ctx, o)
		},
	}, &corev1.Event{}, func(obj any) (any, error) {
		ev, ok := obj.(*corev1.Event)
		if !ok {
			return obj, nil
		}
		return &item{ObjectMeta: slim(ev.ObjectMeta), block: DigestEvent(ev)}, nil
	})
	c.mu.Unlock()
	for _, src := range c.opts.Sources {
		go func() {
			if err := src.Run(ctx, c.signal); err != nil && ctx.Err() == nil {
				log.FromContext(ctx).Error(err, "a result source stopped")
			}
		}()
	}
	ticker := time.NewTicker(c.opts.DiscoveryInterval)
	defer ticker.Stop()
	logger := log.FromContext(ctx)
	// A failing discovery (an API the cluster does not serve is not one: see served) is logged
	// when it starts, when its error changes and when it ends, without a stack trace: the same
	// error every DiscoveryInterval says nothing new.
	var lastErr string
	for {
		err := c.discover(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			logger.Info("discovery of report and policy APIs failed; will retry", "error", lastErr, "retryIn", c.opts.DiscoveryInterval)
		case err != nil:
			logger.V(1).Info("discovery of report and policy APIs failed again", "error", lastErr)
		case lastErr != "":
			lastErr = ""
			logger.Info("discovery of report and policy APIs succeeded after failing")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// served says whether the cluster serves gvr. A group or version it does not serve is an answer,
// not an error (a cluster without Kyverno yet, or with reports kept elsewhere): the memory-cached
// discovery says so with ErrCacheNotFound, the server with NotFound.
// preferredVersion is the first of kind's versions (most preferred first) that served says the
// cluster serves: v1 once Kyverno 1.17+ serves it, v1beta1 on 1.16; "" when none is.
func preferredVersion(kind PolicyKind, served func(schema.GroupVersionResource) (bool, error)) (string, error) {
	for _, v := range kind.Versions {
		ok, err := served(kind.WithVersion(v))
		if err != nil {
			return "", err
		}
		if ok {
			return v, nil
		}
	}
	return "", nil
}

func served(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if notServed(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// notServed says whether a discovery error means the group version is not served.
func notServed(err error) bool {
	return apierrors.IsNotFound(err) || errors.Is(err, memory.ErrCacheNotFound) || discovery.IsGroupDiscoveryFailedError(err)
}

// discover starts informers for report and policy APIs the cluster serves now.
func (c *Collector) discover(ctx context.Context) error {
	c.discovery.Invalidate()
	c.mapper.Reset()
	served := func(gvr schema.GroupVersionResource) (bool, error) { return served(c.discovery, gvr) }
	var apis []string
	for _, gvr := range ReportKinds {
		ok, err := served(gvr)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if api := gvr.GroupVersion().String(); !slices.Contains(apis, api) {
			apis = append(apis, api)
		}
		c.mu.Lock()
		if _, started := c.reports[gvr]; !started {
			c.reports[gvr] = c.newInformer(ctx, c.reportClients, c.reportClients.listWatch(gvr), exampleReport(gvr), func(obj any) (any, error) {
				report, objMeta, ok := reportOf(gvr, obj)
				if !ok {
					return obj, nil
				}
				digests := DigestReport(report)
				for _, d := range digests {
					c.watchApplications(d.Resource)
				}
				return &item{ObjectMeta: slim(objMeta), digests: digests}, nil
			})
		}
		c.mu.Unlock()
	}
	for _, kind := range PolicyKinds {
		version, err := preferredVersion(kind, served)
		if err != nil {
			return err
		}
		if version == "" {
			continue
		}
		c.mu.Lock()
		// A kind read at another version than the cluster now prefers (Kyverno upgraded from
		// 1.16) is read again at that version, and the old informer stopped.
		if current, started := c.policies[kind.GroupResource]; !started || current.version != version {
			if started {
				current.stop()
			}
			c.policies[kind.GroupResource] = c.watchPolicies(ctx, kind, version)
		}
		c.mu.Unlock()
	}
	sort.Strings(apis)
	engineChanged, err := c.discoverEngine(ctx)
	if err != nil {
		return err
	}
	gatekeeperChanged, err := c.discoverGatekeeper(ctx)
	if err != nil {
		return err
	}
	engineChanged = engineChanged || gatekeeperChanged
	hooks, err := c.metadata.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}).
		List(ctx, metav1.ListOptions{LabelSelector: kyvernoWebhookLabel, Limit: 1})
	if err != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("list Kyverno's webhook configurations: %w", err)
	}
	c.mu.Lock()
	webhooks := err == nil && len(hooks.Items) > 0
	if webhooks != c.webhooks || fmt.Sprint(apis) != fmt.Sprint(c.served) || engineChanged {
		c.webhooks, c.served = webhooks, apis
		c.signal()
	}
	c.discovered = true
	c.mu.Unlock()
	return nil
}

// policyInformer reads one policy kind at one version.
type policyInformer struct {
	version  string
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// watchPolicies starts an informer that keeps the policies' identity and annotations, of the kind
// at version.
func (c *Collector) watchPolicies(ctx context.Context, kind PolicyKind, version string) *policyInformer {
	ctx, stop := context.WithCancel(ctx)
	inf := c.newInformer(ctx, c.metadata, c.metadataListWatch(kind.WithVersion(version), ""), &metav1.PartialObjectMetadata{}, func(obj any) (any, error) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil
		}
		return policyItem(kind.Kind, m), nil
	})
	return &policyInformer{version: version, informer: inf, stop: stop}
}

// policyItem is what a policy informer keeps of a policy of kind: its key and the title,
// category and severity its annotations give. A shadow (labelled policyhub.io/shadow=true) also
// keeps that label and its shadow-of and content-hash annotations, cut to their bounds, in the
// item's own label and annotation maps: an ordinary policy leaves them nil and costs what it did.
func policyItem(kind string, m *metav1.PartialObjectMetadata) *item {
	a := m.Annotations
	it := &item{ObjectMeta: slim(m.ObjectMeta), policy: &PolicyKey{Kind: kind, Namespace: m.Namespace, Name: m.Name},
		info: PolicyInfo{Title: Cut(a[annotationTitle], 256), Category: a[annotationCategory], Severity: a[annotationSeverity]}}
	if m.Labels[policyhubv1.LabelShadow] == policyhubv1.ShadowValue {
		it.Labels = map[string]string{policyhubv1.LabelShadow: policyhubv1.ShadowValue}
		it.Annotations = map[string]string{
			policyhubv1.AnnotationShadowOf:    Cut(a[policyhubv1.AnnotationShadowOf], MaxShadowOf),
			policyhubv1.AnnotationContentHash: Cut(a[policyhubv1.AnnotationContentHash], MaxShadowContentHash),
		}
	}
	return it
}

// shadow is what a policy item kept of a shadow's annotations; ok is false for any other item.
func (i *item) shadow() (info ShadowInfo, ok bool) {
	if i.policy == nil || i.Labels[policyhubv1.LabelShadow] != policyhubv1.ShadowValue {
		return ShadowInfo{}, false
	}
	return ShadowInfo{Of: i.Annotations[policyhubv1.AnnotationShadowOf], ContentHash: i.Annotations[policyhubv1.AnnotationContentHash]}, true
}

// watchApplications starts, once per kind, a metadata informer that keeps only the application
// label of the resources of the kind a report is about.
func (c *Collector) watchApplications(r Resource) {
	if r.Kind == "" || r.APIVersion == "" {
		return
	}
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(r.Kind).GroupKind(), gv.Version)
	if err != nil {
		return // a kind the cluster no longer serves: nothing to attribute
	}
	gvr := mapping.Resource
	c.appsMu.Lock()
	defer c.appsMu.Unlock()
	if _, started := c.apps[gvr]; started || c.ctx == nil {
		return
	}
	label := c.opts.ApplicationLabel
	c.apps[gvr] = c.newInformer(c.ctx, c.metadata, c.metadataListWatch(gvr, label), &metav1.PartialObjectMetadata{}, func(obj any) (any, error) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil
		}
		return &item{ObjectMeta: slim(m.ObjectMeta), app: m.Labels[label]}, nil
	})
}

// metadataListWatch lists and watches metadata only, and only objects with labelKey when set.
func (c *Collector) metadataListWatch(gvr schema.GroupVersionResource, labelKey string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labelKey
			return c.metadata.Resource(gvr).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labelKey
			return c.metadata.Resource(gvr).Watch(ctx, o)
		},
	}
}

// newInformer starts an informer whose store holds only what transform keeps. client is the
// client behind lw: a fake one says it cannot stream the initial list (WatchList), and the
// informer then lists, as informer-gen's informers do.
func (c *Collector) newInformer(ctx context.Context, client any, lw *cache.ListWatch, example runtime.Object, transform cache.TransformFunc) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), example, 0, cache.Indexers{})
	_ = inf.SetTransform(transform)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.signal() },
		UpdateFunc: func(any, any) { c.signal() },
		DeleteFunc: func(any) { c.signal() },
	})
	go inf.RunWithContext(ctx)
	return inf
}

// Synced says whether the served APIs were discovered and every informer started so far has
// listed once.
func (c *Collector) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := []cache.SharedIndexInformer{}
	if c.events != nil {
		all = append(all, c.events)
	}
	c.appsMu.Lock()
	defer c.appsMu.Unlock()
	for _, m := range []map[schema.GroupVersionResource]cache.SharedIndexInformer{c.reports, c.apps} {
		for _, inf := range m {
			all = append(all, inf)
		}
	}
	for _, p := range c.policies {
		all = append(all, p.informer)
	}
	for _, inf := range all {
		if !inf.HasSynced() {
			return false
		}
	}
	for _, src := range c.opts.Sources {
		if !src.Synced() {
			return false
		}
	}
	return c.discovered && c.engineSynced() && c.gatekeeperSynced()
}

// Snapshot returns what the collector knows now, with the server-side dry-runs among the
// refusals counted from Kyverno's metrics, read now (dryruns.go).
func (c *Collector) Snapshot() Snapshot {
	s := c.snapshot()
	c.countDryRuns(&s)
	for _, src := range c.opts.Sources {
		src.AddTo(&s)
	}
	return s
}

// snapshot returns what the informers hold now.
func (c *Collector) snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{
		Policies:     map[PolicyKey]PolicyInfo{},
		Shadows:      map[PolicyKey]ShadowInfo{},
		Applications: map[types.UID]string{},
		Engine:       policyhubv1.EngineInfo{ReportAPIs: append([]string(nil), c.served...), KyvernoWebhooks: c.webhooks},
	}
	c.engineSnapshot(&s.Engine)
	if c.webhooks {
		// The engines that run: Kyverno where its webhooks are registered; Gatekeeper and the
		// Sources add theirs.
		s.Engine.AddEngine(policyhubv1.EngineKyverno)
	}
	c.gatekeeperSnapshot(&s)
	for _, inf := range c.reports {
		for _, obj := range inf.GetStore().List() {
			if it, ok := obj.(*item); ok {
				s.Digests = append(s.Digests, it.digests...)
			}
		}
	}
	if c.events != nil {
		for _, obj := range c.events.GetStore().List() {
			if it, ok := obj.(*item); ok && it.block != nil {
				s.Blocks = append(s.Blocks, it.block)
			}
		}
	}
	for _, p := range c.policies {
		for _, obj := range p.informer.GetStore().List() {
			if it, ok := obj.(*item); ok && it.policy != nil {
				s.Policies[*it.policy] = it.info
				if shadow, ok := it.shadow(); ok {
					s.Shadows[*it.policy] = shadow
				}
			}
		}
	}
	c.appsMu.Lock()
	defer c.appsMu.Unlock()
	for _, inf := range c.apps {
		for _, obj := range inf.GetStore().List() {
			if it, ok := obj.(*item); ok && it.app != "" {
				s.Applications[it.UID] = it.app
			}
		}
	}
	return s
}

// item is what an informer stores in place of the object it received: its identity and digest.
type item struct {
	metav1.ObjectMeta
	digests []*Digest
	block   *Block
	policy  *PolicyKey
	info    PolicyInfo
	app     string
}

// GetObjectKind, DeepCopyObject: item is stored by informers, which need a runtime.Object.
func (i *item) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (i *item) DeepCopyObject() runtime.Object {
	out := *i
	i.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// slim keeps the identity an informer needs to key and update an object.
func slim(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}
