package summarize

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Folding a snapshot: interning policy keys and applications, resolving kindless keys, and
// counting every digest and block into the policies, the applications and the totals.

// nsName is a policy's namespace and name, what reports name a policy by when they omit its kind.
type nsName struct{ namespace, name string }

// policy is one policy of the summary: every key that names it, merged.
type policy struct {
	key    collect.PolicyKey
	ref    int32 // index of its policy string in fold.refs
	counts policyhubv1.ResultCounts
	// oldest is when the oldest of its results was made.
	oldest  time.Time
	blocked int64
	// blockedDryRuns are the server-side dry-runs taken out of blocked.
	blockedDryRuns int64
	// lastBlock is the newest refused admission of the policy.
	lastBlock *collect.Block
	severity  tally
	category  tally
	info      collect.PolicyInfo
	// shadow: the policy is a shadow (by its name, known to the collector or not), whose
	// results are never compliance: no total, policy, application, namespace, violation or
	// blocked count holds them.
	shadow bool
}

type app struct{ namespace, name string }

// appEntry is the results of one policy (by policy string) for one application.
type appEntry struct {
	app, ref int32
	counts   policyhubv1.ResultCounts
	blocked  int64
}

// digest is a digest and the application of its resource (-1 for none).
type digest struct {
	*collect.Digest
	app int32
}

// fold accumulates a snapshot in two passes: the first interns policy keys and applications to
// small integers and resolves kindless keys (which needs every key), the second counts. Digests are
// counted application by application, so that one application's results add up in a dense row
// indexed by policy and are offered to the top-N as soon as the application is done: no map or
// list of application × policy (600k entries at 50k resources × 200 policies) is ever built.
type fold struct {
	s collect.Snapshot

	rawIndex map[collect.PolicyKey]int32
	raws     []collect.PolicyKey
	rawPols  []*policy // by raw key, once resolved
	hint     []int32   // raw key by position in the previous digest's Policies
	hintKey  []unique.Handle[collect.PolicyKey]

	appIndex   map[app]int32
	apps       []app
	digests    []digest // grouped by application
	blockApps  []int32  // application of each block, -1 for none
	appEntries int      // application entries in all, kept or not

	policies map[collect.PolicyKey]*policy
	refIndex map[string]int32
	refs     []string

	totals         policyhubv1.ResultCounts
	blocked        int64
	blockedDryRuns int64
	// exceptions are the results each Kyverno PolicyException exempted, by its name as the API
	// carries it (cut to its bound).
	exceptions map[string]int64
	// namespaces are the results and refusals of each namespace's resources, every policy together.
	namespaces map[string]*namespaceCounts
}

// namespaceCounts are one namespace's results and refused admissions.
type namespaceCounts struct {
	counts  policyhubv1.ResultCounts
	blocked int64
}

// namespace is the counts of namespace ns, made on first use ("" is cluster-scoped: nil).
func (f *fold) namespace(ns string) *namespaceCounts {
	if ns == "" {
		return nil
	}
	n := f.namespaces[ns]
	if n == nil {
		n = &namespaceCounts{}
		f.namespaces[ns] = n
	}
	return n
}

func newFold(s collect.Snapshot) *fold {
	return &fold{
		s:          s,
		rawIndex:   map[collect.PolicyKey]int32{},
		appIndex:   map[app]int32{},
		policies:   map[collect.PolicyKey]*policy{},
		refIndex:   map[string]int32{},
		exceptions: map[string]int64{},
		namespaces: map[string]*namespaceCounts{},
	}
}

func (f *fold) raw(k collect.PolicyKey) int32 {
	return indexOf(f.rawIndex, &f.raws, k)
}

// indexOf interns k to a small integer: its position in list, appended when new.
func indexOf[K comparable](index map[K]int32, list *[]K, k K) int32 {
	if i, ok := index[k]; ok {
		return i
	}
	i := int32(len(*list))
	index[k] = i
	*list = append(*list, k)
	return i
}

// rawAt is raw for the i-th entry of a digest's Policies. Reports list their policies in much the
// same order: the policy found at this position last time is compared (a pointer) before this
// one is hashed.
func (f *fold) rawAt(i int, pc *collect.PolicyCounts) int32 {
	h := pc.PolicyHandle()
	if i < len(f.hint) && f.hintKey[i] == h {
		return f.hint[i]
	}
	ri := f.raw(h.Value())
	if i < len(f.hint) {
		f.hint[i], f.hintKey[i] = ri, h
	} else {
		f.hint, f.hintKey = append(f.hint, ri), append(f.hintKey, h)
	}
	return ri
}

// appOf is the index of the application a resource belongs to, or -1.
func (f *fold) appOf(r collect.Resource) int32 {
	if r.UID == "" {
		return -1
	}
	name := f.s.Applications[r.UID]
	if name == "" {
		return -1
	}
	return indexOf(f.appIndex, &f.apps, app{namespace: r.Namespace, name: name})
}

// register interns every policy key and application, and groups the digests by application.
func (f *fold) register() {
	f.digests = make([]digest, 0, len(f.s.Digests))
	for _, d := range f.s.Digests {
		if d == nil {
			continue
		}
		f.digests = append(f.digests, digest{Digest: d, app: f.appOf(d.Resource)})
		for i := range d.Policies {
			f.rawAt(i, &d.Policies[i])
		}
		// A violation names its policy too; it may be the only place a policy shows up.
		for i := range d.Violations {
			f.raw(d.Violations[i].Policy)
		}
	}
	slices.SortStableFunc(f.digests, func(a, b digest) int { return cmp.Compare(a.app, b.app) })
	f.blockApps = make([]int32, len(f.s.Blocks))
	for i, b := range f.s.Blocks {
		f.blockApps[i] = -1
		if b != nil {
			f.raw(b.Policy)
			f.blockApps[i] = f.appOf(b.Resource)
		}
	}
}

// resolve maps every key to its policy. wgpolicyk8s.io results name a policy without its kind;
// when the policy's name is unambiguous (one kind among the policies the collector read, or else
// among the keys seen), the kindless key is that policy.
func (f *fold) resolve() {
	known := kindsByName(maps.Keys(f.s.Policies))
	seen := kindsByName(slices.Values(f.raws))
	f.rawPols = make([]*policy, len(f.raws))
	for ri, k := range f.raws {
		if k.Kind == "" {
			nn := nsName{k.Namespace, k.Name}
			kinds := known[nn]
			if len(kinds) == 0 {
				kinds = seen[nn]
			}
			if len(kinds) == 1 {
				k.Kind = kinds[0]
			}
		}
		p := f.policies[k]
		if p == nil {
			p = &policy{key: k, ref: f.ref(policyRef(k)), info: f.info(k), shadow: policyhubv1.IsShadowName(k.Name)}
			f.policies[k] = p
		}
		f.rawPols[ri] = p
	}
}

// kindsByName lists the distinct non-empty kinds per namespace and name.
func kindsByName(keys iter.Seq[collect.PolicyKey]) map[nsName][]string {
	out := map[nsName][]string{}
	for k := range keys {
		if k.Kind == "" {
			continue
		}
		nn := nsName{k.Namespace, k.Name}
		if !slices.Contains(out[nn], k.Kind) {
			out[nn] = append(out[nn], k.Kind)
		}
	}
	return out
}

// info is what the policy's annotations say; a kindless entry stands for any kind.
func (f *fold) info(k collect.PolicyKey) collect.PolicyInfo {
	if i, ok := f.s.Policies[k]; ok {
		return i
	}
	return f.s.Policies[collect.PolicyKey{Namespace: k.Namespace, Name: k.Name}]
}

func (f *fold) ref(s string) int32 {
	return indexOf(f.refIndex, &f.refs, s)
}

// policyRef is how applications and violations name a policy: "name" when cluster-scoped,
// "namespace/name" when namespaced. Policies of two kinds with one name share it.
func policyRef(k collect.PolicyKey) string {
	return policyhubv1.PolicyRef(k.Namespace, k.Name)
}

// count sums every digest and block into the totals and the policies, and offers each
// application's entries to apps.
func (f *fold) count(apps *topK[appEntry]) {
	appBlocks := map[int32][]*collect.Block{}
	for i, b := range f.s.Blocks {
		if b == nil {
			continue
		}
		n := blockCount(b)
		p := f.rawPols[f.rawIndex[b.Policy]]
		if p.shadow {
			continue // a shadow never denies; should an Event say so, it is not compliance
		}
		p.blocked += n
		if p.lastBlock == nil || newerBlock(b, p.lastBlock) {
			p.lastBlock = b
		}
		f.blocked += n
		if ns := f.namespace(b.Resource.Namespace); ns != nil {
			ns.blocked += n
		}
		if a := f.blockApps[i]; a >= 0 {
			appBlocks[a] = append(appBlocks[a], b)
		}
	}
	f.takeOutDryRuns()

	row := make([]appEntry, len(f.refs)) // the current application's entries, by policy string
	inRow := make([]bool, len(f.refs))
	var touched []int32
	entry := func(ref int32) *appEntry {
		if !inRow[ref] {
			inRow[ref] = true
			touched = append(touched, ref)
		}
		return &row[ref]
	}
	flush := func(a int32) {
		for _, b := range appBlocks[a] {
			entry(f.rawPols[f.rawIndex[b.Policy]].ref).blocked += blockCount(b)
		}
		delete(appBlocks, a)
		for _, ref := range touched {
			e := row[ref]
			e.app, e.ref = a, ref
			apps.offer(e)
			row[ref], inRow[ref] = appEntry{}, false
		}
		f.appEntries += len(touched)
		touched = touched[:0]
	}

	cur := int32(-1)
	for _, d := range f.digests {
		if d.app != cur {
			if cur >= 0 {
				flush(cur)
			}
			cur = d.app
		}
		// Made on the first result counted, so that a resource only shadows judge makes no
		// namespace; a digest of no result at all still shows its namespace, empty.
		var ns *namespaceCounts
		if len(d.Policies) == 0 {
			ns = f.namespace(d.Resource.Namespace)
		}
		for i := range d.Policies {
			pc := &d.Policies[i]
			p := f.rawPols[f.rawAt(i, pc)]
			if p.shadow {
				continue
			}
			if ns == nil {
				ns = f.namespace(d.Resource.Namespace)
			}
			addCounts(&p.counts, pc.Counts)
			addCounts(&f.totals, pc.Counts)
			if ns != nil {
				addCounts(&ns.counts, pc.Counts)
			}
			if oldest := pc.Oldest(); !oldest.IsZero() && (p.oldest.IsZero() || oldest.Before(p.oldest)) {
				p.oldest = oldest
			}
			p.severity.add(pc.Severity())
			p.category.add(pc.Category())
			if cur >= 0 {
				addCounts(&entry(p.ref).counts, pc.Counts)
			}
		}
		for i := range d.Violations {
			v := &d.Violations[i]
			p := f.rawPols[f.rawIndex[v.Policy]]
			if p.shadow {
				continue
			}
			p.severity.add(v.Severity)
			p.category.add(v.Category)
		}
		for _, e := range d.Exceptions {
			f.addException(e)
		}
	}
	if cur >= 0 {
		flush(cur)
	}
	// Applications with blocked admissions and no results.
	for _, a := range slices.Sorted(maps.Keys(appBlocks)) {
		flush(a)
	}
}

// addException counts a digest's results one exception exempted. The collector already cut the
// name to the API's bound; a name cut here could meet another, and adds to it.
func (f *fold) addException(e collect.ExceptionCount) {
	name := policyhubv1.CutUTF8(e.Name, policyhubv1.MaxSummaryNameLength)
	if name == "" || e.Results <= 0 {
		return
	}
	f.exceptions[name] += int64(e.Results)
}

// takeOutDryRuns moves the server-side dry-runs among each policy's refusals from blocked to
// blockedDryRuns: at most its refusals (both are counted over about the same hour, the Events'
// and the metric's). The namespaces' and applications' blocked keep them (the Events do not say
// which of a policy's refusals were the dry-runs).
func (f *fold) takeOutDryRuns() {
	for key, n := range f.s.DryRuns {
		i, ok := f.rawIndex[key]
		if !ok || n <= 0 {
			continue // no refusal of the policy in the Events: nothing to take out
		}
		p := f.rawPols[i]
		d := min(n, p.blocked)
		p.blocked -= d
		p.blockedDryRuns += d
		f.blocked -= d
		f.blockedDryRuns += d
	}
}

// newerBlock orders blocks newest first; ties by resource and message, for determinism.
func newerBlock(a, b *collect.Block) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	if c := cmp.Compare(a.Resource.Namespace+"/"+a.Resource.Name, b.Resource.Namespace+"/"+b.Resource.Name); c != 0 {
		return c < 0
	}
	return a.Message < b.Message
}

// lastBlocked is the API form of a policy's newest block; none for a count that names no
// admission (the API server's refusals of a ValidatingAdmissionPolicy, read from its metrics).
func lastBlocked(b *collect.Block) *policyhubv1.BlockedAdmission {
	if b == nil || (b.Message == "" && b.Resource == (collect.Resource{}) && b.Time.IsZero()) {
		return nil
	}
	out := &policyhubv1.BlockedAdmission{Message: policyhubv1.CutUTF8(b.Message, collect.MaxMessage)}
	if b.Resource.Kind != "" || b.Resource.Name != "" {
		out.Resource = &policyhubv1.ResourceRef{APIVersion: b.Resource.APIVersion, Kind: b.Resource.Kind, Namespace: b.Resource.Namespace, Name: b.Resource.Name}
	}
	if !b.Time.IsZero() {
		out.Time = &metav1.Time{Time: b.Time.UTC().Truncate(time.Second)}
	}
	return out
}

// blockCount is how many admissions an Event stands for: an Event without a count happened once.
func blockCount(b *collect.Block) int64 {
	if b.Count <= 0 {
		return 1
	}
	return int64(b.Count)
}

func addCounts(dst *policyhubv1.ResultCounts, c collect.Counts) {
	dst.Pass += int64(c.Pass)
	dst.Fail += int64(c.Fail)
	dst.Warn += int64(c.Warn)
	dst.Error += int64(c.Error)
	dst.Skip += int64(c.Skip)
}
