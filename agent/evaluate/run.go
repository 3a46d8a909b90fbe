package evaluate

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Defaults of Options.
const (
	DefaultInterval          = time.Minute
	DefaultTimeout           = 2 * time.Minute
	DefaultMaxPolicies       = 100
	DefaultMaxBindings       = 500
	DefaultMaxResourceTypes  = 20
	DefaultMaxObjectsPerType = 20000
	DefaultMaxObjects        = 50000
	DefaultMaxNamespaces     = 10000
	DefaultPageSize          = 500
)

var (
	policiesGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	bindingsGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
)

// Options configure a Runner; zero values mean the defaults.
type Options struct {
	// Interval is how often everything is evaluated again (objects change without telling);
	// a policy or binding change is evaluated at once.
	Interval time.Duration
	// Timeout bounds one evaluation; what it did not reach is left out and said so.
	Timeout time.Duration
	// Bounds: policies and bindings read, resource types listed, objects per type and in all,
	// namespaces read, objects a list request asks for.
	MaxPolicies, MaxBindings, MaxResourceTypes, MaxObjectsPerType, MaxObjects, MaxNamespaces int
	PageSize                                                                                 int64
	// ApplicationLabel names a resource's application; empty means app.oam.dev/name.
	ApplicationLabel string
}

func (o Options) withDefaults() Options {
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&o.MaxPolicies, DefaultMaxPolicies)
	pick(&o.MaxBindings, DefaultMaxBindings)
	pick(&o.MaxResourceTypes, DefaultMaxResourceTypes)
	pick(&o.MaxObjectsPerType, DefaultMaxObjectsPerType)
	pick(&o.MaxObjects, DefaultMaxObjects)
	pick(&o.MaxNamespaces, DefaultMaxNamespaces)
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ApplicationLabel == "" {
		o.ApplicationLabel = "app.oam.dev/name"
	}
	return o
}

// Runner evaluates the cluster's objects against its ValidatingAdmissionPolicies in the
// background and is a collect.Source. Safe for concurrent use.
type Runner struct {
	opts      Options
	clientset kubernetes.Interface
	dynamic   dynamic.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	refusals  refusals
	now       func() time.Time

	// since is, per policy, the fingerprint of its version and its bindings' and when that
	// version was first evaluated (only the evaluating goroutine touches it).
	since map[string]sinceEntry
	// judged keeps, per object, the resourceVersion it was judged at and its digest, valid while
	// the policies, bindings and namespaces are those of judgedKey: an unchanged object is not
	// judged again (judging is the API server's per-request work, some 30 µs per object and
	// policy; the list is the steady cost). Only the evaluating goroutine touches them.
	judged    map[types.UID]judgement
	judgedKey string

	mu     sync.Mutex
	synced bool
	result *Result
}

type judgement struct {
	resourceVersion string
	digest          *collect.Digest
}

type sinceEntry struct {
	fingerprint string
	at          time.Time
}

// Result is one evaluation: what it adds to a snapshot.
type Result struct {
	// Served: the cluster serves ValidatingAdmissionPolicies; nothing else is set otherwise.
	Served       bool
	Digests      []*collect.Digest
	Policies     map[collect.PolicyKey]collect.PolicyInfo
	Applications map[types.UID]string
	NotEvaluated string
	Refusals     refusalReading
	// Objects and Types count what was read, Judged the objects judged again (the others were
	// unchanged since the last evaluation, and so were the policies); Elapsed is how long it took.
	Objects, Types, Judged int
	Elapsed                time.Duration
	hash                   uint64
}

// New returns a Runner for the cluster cfg reaches.
func New(cfg *rest.Config, o Options) (*Runner, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Runner{opts: o.withDefaults(), clientset: cs, dynamic: dyn, metadata: md, discovery: cs.Discovery(),
		refusals: refusals{client: cs.Discovery().RESTClient()}, now: time.Now, since: map[string]sinceEntry{}}, nil
}

// Run evaluates at once, then on every change of a policy or binding and every Interval,
// calling changed when the result differs from the last one (a quiet cluster changes nothing).
func (r *Runner) Run(ctx context.Context, changed func()) error {
	logger := log.FromContext(ctx).WithName("vap-evaluation")
	ctx = log.IntoContext(ctx, logger)
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	ticker := time.NewTicker(r.opts.Interval)
	defer ticker.Stop()
	watching := false
	for {
		res := r.Evaluate(ctx)
		if res.Served && !watching {
			// Policy and binding changes, metadata only (a slim store): each re-evaluates.
			r.watch(ctx, policiesGVR, poke)
			r.watch(ctx, bindingsGVR, poke)
			watching = true
		}
		r.mu.Lock()
		differs := r.result == nil || r.result.hash != res.hash
		r.result, r.synced = res, true
		r.mu.Unlock()
		if differs {
			changed()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-trigger:
		}
	}
}

// watch starts a metadata informer on gvr whose changes (after its first list) poke.
func (r *Runner) watch(ctx context.Context, gvr schema.GroupVersionResource, poke func()) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.metadata.Resource(gvr).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.metadata.Resource(gvr).Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, r.metadata), &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion}}, nil
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				poke()
			}
		},
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	go inf.RunWithContext(ctx)
}

// Synced says whether one evaluation has finished.
func (r *Runner) Synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

// AddTo adds the last evaluation's results to s.
func (r *Runner) AddTo(s *collect.Snapshot) {
	r.mu.Lock()
	res := r.result
	r.mu.Unlock()
	if res == nil || !res.Served {
		return
	}
	s.Engine.AddEngine(policyhubv1.EngineKubernetes)
	counted := res.Refusals.Counted
	s.Engine.AdmissionPolicies = &policyhubv1.AdmissionPolicyFacts{Evaluated: true, RefusalsCounted: &counted,
		RefusalsNotCounted: policyhubv1.CutUTF8(res.Refusals.NotCounted, policyhubv1.MaxDryRunsNotCountedLength),
		NotEvaluated:       policyhubv1.CutUTF8(res.NotEvaluated, policyhubv1.MaxNotEvaluatedLength)}
	s.Digests = append(s.Digests, res.Digests...)
	if s.Policies == nil {
		s.Policies = map[collect.PolicyKey]collect.PolicyInfo{}
	}
	for k, v := range res.Policies {
		s.Policies[k] = v
	}
	if s.Applications == nil {
		s.Applications = map[types.UID]string{}
	}
	for uid, app := range res.Applications {
		s.Applications[uid] = app
	}
	for _, name := range slices.Sorted(mapsKeys(res.Refusals.Blocked)) {
		if n := res.Refusals.Blocked[name]; n > 0 {
			s.Blocks = append(s.Blocks, &collect.Block{Policy: Key(name), Count: int32(min(n, math.MaxInt32))})
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var _ collect.Source = (*Runner)(nil)
