package evaluate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	s.Engine.Engines = withEngine(s.Engine.Engines, policyhubv1.EngineKubernetes)
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

// withEngine adds e to engines, kept in PolicyEngines' order (a set: the order is not content).
func withEngine(engines []policyhubv1.PolicyEngine, e policyhubv1.PolicyEngine) []policyhubv1.PolicyEngine {
	if slices.Contains(engines, e) {
		return engines
	}
	engines = append(slices.Clone(engines), e)
	order := policyhubv1.PolicyEngines()
	slices.SortFunc(engines, func(a, b policyhubv1.PolicyEngine) int { return slices.Index(order, a) - slices.Index(order, b) })
	return engines
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

// Evaluate reads the cluster and evaluates every bound policy against the objects it matches,
// within Timeout; failures are logged and said in the result's NotEvaluated.
func (r *Runner) Evaluate(ctx context.Context) *Result {
	start := r.now()
	logger := log.FromContext(ctx)
	// The refusals are read with their own time limit, also when the evaluation ran out of its.
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	res := &Result{Policies: map[collect.PolicyKey]collect.PolicyInfo{}, Applications: map[types.UID]string{}}
	served, err := servedHere(r.discovery)
	if err != nil || !served {
		if err != nil {
			logger.Info("cannot tell whether ValidatingAdmissionPolicies are served", "error", err.Error())
		}
		res.hash = res.fingerprint()
		return res
	}
	res.Served = true
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }

	policies, more, err := listPolicies(ctx, r.clientset, r.opts.PageSize, r.opts.MaxPolicies)
	if more {
		note("policies beyond the first %d", r.opts.MaxPolicies)
	}
	bindings, moreBindings, err2 := listBindings(ctx, r.clientset, r.opts.PageSize, r.opts.MaxBindings)
	if moreBindings {
		note("bindings beyond the first %d", r.opts.MaxBindings)
	}
	namespaces, moreNamespaces, err3 := listNamespaces(ctx, r.clientset, r.opts.PageSize, r.opts.MaxNamespaces)
	if err := errors.Join(err, err2); err != nil {
		note("%v", err)
		logger.Info("background evaluation of ValidatingAdmissionPolicies failed", "error", err.Error())
		res.NotEvaluated = strings.Join(notes, "; ")
		res.Refusals = r.refusals.read(parent, r.now())
		res.hash = res.fingerprint()
		return res
	}
	if err3 != nil {
		note("%v", err3) // selectors on namespaces then fail to match: those objects are not judged
	}
	if moreNamespaces {
		note("namespaces beyond the first %d", r.opts.MaxNamespaces)
	}
	set, skipped := NewSet(SetInput{Policies: policies, Bindings: bindings, Namespaces: namespaces,
		AllNamespaces: err3 == nil && !moreNamespaces, Since: r.sinceOf(policies, bindings, start), Client: r.clientset})
	for _, s := range skipped {
		note("%s: %s", s.Name, s.Reason)
	}
	for _, p := range set.policies {
		a := p.policy.Annotations
		res.Policies[p.key] = collect.PolicyInfo{Title: collect.Cut(a["policies.kyverno.io/title"], 256),
			Category: collect.Cut(a["policies.kyverno.io/category"], 64), Severity: collect.Cut(a["policies.kyverno.io/severity"], 64)}
	}
	r.judgeAll(ctx, set, setKey(policies, bindings, namespaces), res, note)
	res.Refusals = r.refusals.read(parent, r.now())
	res.NotEvaluated = strings.Join(notes, "; ")
	res.Elapsed = r.now().Sub(start)
	res.hash = res.fingerprint()
	logger.V(1).Info("evaluated ValidatingAdmissionPolicies", "policies", set.Len(), "resourceTypes", res.Types,
		"objects", res.Objects, "judged", res.Judged, "elapsed", res.Elapsed, "notEvaluated", res.NotEvaluated)
	return res
}

// judgeAll lists the objects of every type the set's policies match and judges each.
func (r *Runner) judgeAll(ctx context.Context, set *Set, key string, res *Result, note func(string, ...any)) {
	if key != r.judgedKey || set.Len() == 0 {
		r.judged, r.judgedKey = nil, key
	}
	if set.Len() == 0 {
		return
	}
	judged := make(map[types.UID]judgement, len(r.judged))
	defer func() { r.judged = judged }()
	groups, lists, err := r.discovery.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		note("discovery: %v", err)
		return
	}
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	targets, cut := Targets(set.definitions(), lists, preferred, r.opts.MaxResourceTypes)
	if cut > 0 {
		note("%d resource types beyond the first %d", cut, r.opts.MaxResourceTypes)
	}
	unknownNS := 0
	for _, t := range targets {
		left := r.opts.MaxObjects - res.Objects
		if left <= 0 {
			note("objects beyond %d in all", r.opts.MaxObjects)
			break
		}
		res.Types++
		more, err := eachObject(ctx, r.dynamic, t.GVR, r.opts.PageSize, min(left, r.opts.MaxObjectsPerType), func(obj *unstructured.Unstructured) {
			res.Objects++
			uid, rv := obj.GetUID(), obj.GetResourceVersion()
			j, known := r.judged[uid]
			if !known || uid == "" || rv == "" || j.resourceVersion != rv {
				d, err := set.Evaluate(ctx, obj, t.GVR)
				if errors.Is(err, ErrUnknownNamespace) {
					unknownNS++
					return
				}
				j = judgement{resourceVersion: strings.Clone(rv), digest: d}
				res.Judged++
			}
			if uid != "" {
				if d := j.digest; d != nil {
					uid = d.Resource.UID // the digest's copy, not the page's
				} else {
					uid = types.UID(strings.Clone(string(uid)))
				}
				judged[uid] = j
			}
			d := j.digest
			if d == nil {
				return
			}
			res.Digests = append(res.Digests, d)
			if app := obj.GetLabels()[r.opts.ApplicationLabel]; app != "" && d.Resource.UID != "" {
				res.Applications[d.Resource.UID] = strings.Clone(app)
			}
		})
		switch {
		case ctx.Err() != nil:
			note("stopped at the %s time limit after %d objects", r.opts.Timeout, res.Objects)
			return
		case apierrors.IsForbidden(err):
			note("%s: list forbidden", t.GVR.GroupResource())
		case err != nil:
			note("%s: %v", t.GVR.GroupResource(), err)
		case more:
			note("%s beyond %d objects", t.GVR.GroupResource(), min(left, r.opts.MaxObjectsPerType))
		}
	}
	if unknownNS > 0 {
		note("%d objects of namespaces not read", unknownNS)
	}
}

// definitions are the set's policies.
func (s *Set) definitions() []*admissionregistrationv1.ValidatingAdmissionPolicy {
	out := make([]*admissionregistrationv1.ValidatingAdmissionPolicy, len(s.policies))
	for i, p := range s.policies {
		out[i] = p.policy
	}
	return out
}

// sinceOf is, per policy, when its current version and its bindings' were first evaluated:
// now for a new or changed one, else what was recorded. Policies gone are forgotten.
func (r *Runner) sinceOf(policies []*admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, now time.Time) map[string]time.Time {
	byPolicy := map[string][]string{}
	for _, b := range bindings {
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], fmt.Sprintf("%s/%s/%d", b.Name, b.UID, b.Generation))
	}
	out := map[string]time.Time{}
	next := map[string]sinceEntry{}
	for _, p := range policies {
		bs := byPolicy[p.Name]
		slices.Sort(bs)
		fp := fmt.Sprintf("%s/%d %s", p.UID, p.Generation, strings.Join(bs, ","))
		e, ok := r.since[p.Name]
		if !ok || e.fingerprint != fp {
			e = sinceEntry{fingerprint: fp, at: now.UTC().Truncate(time.Second)}
		}
		next[p.Name] = e
		out[p.Name] = e.at
	}
	r.since = next
	return out
}

// setKey identifies what judging an object depends on besides the object: every policy, binding
// and namespace (labels: namespaceSelector; the object: namespaceObject) at its version.
func setKey(policies []*admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, namespaces []*corev1.Namespace) string {
	h := fnv.New64a()
	for _, p := range policies {
		_, _ = fmt.Fprintln(h, p.UID, p.ResourceVersion)
	}
	for _, b := range bindings {
		_, _ = fmt.Fprintln(h, b.UID, b.ResourceVersion)
	}
	for _, ns := range namespaces {
		_, _ = fmt.Fprintln(h, ns.UID, ns.ResourceVersion)
	}
	return fmt.Sprintf("%d/%d/%d/%x", len(policies), len(bindings), len(namespaces), h.Sum64())
}

// servedHere says whether the cluster serves ValidatingAdmissionPolicies v1.
func servedHere(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(policiesGVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == policiesGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

// fingerprint hashes what the result adds to a snapshot, so an evaluation that found what the
// last one did signals nothing.
func (res *Result) fingerprint() uint64 {
	h := fnv.New64a()
	w := func(parts ...any) { _, _ = fmt.Fprintln(h, parts...) }
	w(res.Served, res.NotEvaluated, res.Refusals.Counted, res.Refusals.NotCounted)
	for _, name := range slices.Sorted(mapsKeys(res.Refusals.Blocked)) {
		w(name, res.Refusals.Blocked[name])
	}
	for _, d := range res.Digests {
		w(d.Resource)
		for i := range d.Policies {
			p := &d.Policies[i]
			w(p.Policy().Name, p.Counts, p.Oldest().Unix())
		}
		for _, v := range d.Violations {
			w(v.Policy.Name, v.Rule, v.Result, v.Message, v.Time.Unix())
		}
	}
	keys := make([]string, 0, len(res.Policies))
	for k, v := range res.Policies {
		keys = append(keys, fmt.Sprint(k, v))
	}
	slices.Sort(keys)
	w(keys)
	apps := make([]string, 0, len(res.Applications))
	for uid, app := range res.Applications {
		apps = append(apps, string(uid)+"="+app)
	}
	slices.Sort(apps)
	w(apps)
	return h.Sum64()
}

var _ collect.Source = (*Runner)(nil)
