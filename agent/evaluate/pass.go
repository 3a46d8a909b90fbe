package evaluate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/policyhub/policyhub/agent/collect"
)

// One evaluation: read the cluster, judge what changed, say what was left out.

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
