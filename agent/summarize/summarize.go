package summarize

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Limits of the API (the CRD's MaxItems and MaxLength); larger options are capped to them, since
// the hub would refuse the summary otherwise.
const (
	maxViolations   = 200
	maxPolicies     = 1000
	maxApplications = 2000
	maxTitle        = 256

	defaultMaxViolations = 50
	defaultMaxBytes      = 512 * 1024
)

// Options bound a summary.
type Options struct {
	// Cluster is the managed cluster's name, written to spec.cluster.
	Cluster string
	// MaxViolations is how many violations are kept (the top ones); 0 means 50; capped at 200.
	MaxViolations int
	// MaxPolicies is how many policies are kept; 0 means (and at most) 1000.
	MaxPolicies int
	// MaxApplications is how many application × policy entries are kept; 0 means (and at most) 2000.
	MaxApplications int
	// MaxBytes bounds the JSON of the spec as pushed (with generatedAt); 0 means 512 KiB.
	MaxBytes int
}

func (o Options) withDefaults() Options {
	o.MaxViolations = bound(o.MaxViolations, defaultMaxViolations, maxViolations)
	o.MaxPolicies = bound(o.MaxPolicies, maxPolicies, maxPolicies)
	o.MaxApplications = bound(o.MaxApplications, maxApplications, maxApplications)
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	return o
}

func bound(v, def, limit int) int {
	if v <= 0 {
		return def
	}
	return min(v, limit)
}

// Summarize folds a snapshot into a PolicyReportSummarySpec, without GeneratedAt (the pusher sets
// it, so that an unchanged summary keeps its content hash).
func Summarize(s collect.Snapshot, o Options) policyhubv1.PolicyReportSummarySpec {
	o = o.withDefaults()
	f := newFold(s)
	f.register()
	f.resolve()
	topApps := newTopK(o.MaxApplications, f.compareAppEntryPriority)
	f.count(topApps)

	// The count limits keep the entries that matter most, in that order, so that the byte limit
	// can cut from the tail.
	pols, allPols := f.topPolicies(o.MaxPolicies)
	apps, allApps := f.applicationSummaries(topApps.sorted()), f.appEntries
	viols, allViols := f.topViolations(o.MaxViolations)
	nPol, nApp, nViol := len(pols), len(apps), len(viols)

	base := policyhubv1.PolicyReportSummarySpec{
		Cluster: o.Cluster,
		Engine:  copyEngine(s.Engine),
		Totals:  f.totals,
		Blocked: f.blocked,
	}
	for {
		spec := assemble(base, pols[:nPol], apps[:nApp], viols[:nViol])
		spec.Truncated = truncation(allPols-nPol, allApps-nApp, allViols-int64(nViol))
		if size(spec) < o.MaxBytes || nPol+nApp+nViol == 0 {
			spec.ContentHash = Hash(spec)
			return spec
		}
		// Applications are the most numerous, and the per-policy view stands without them;
		// violations are examples; policies go last.
		switch {
		case nApp > 0:
			nApp /= 2
		case nViol > 0:
			nViol /= 2
		default:
			nPol /= 2
		}
	}
}

// Hash returns the content hash of a spec: the hex sha256 of its JSON without GeneratedAt and
// ContentHash, so a summary rebuilt from an unchanged cluster hashes the same. encoding/json writes
// struct fields in declaration order, so the JSON of a spec is canonical.
func Hash(spec policyhubv1.PolicyReportSummarySpec) string {
	// What the pusher stamps on every write is not content.
	spec.GeneratedAt = nil
	spec.HeartbeatInterval = nil
	spec.ContentHash = ""
	data, err := json.Marshal(spec)
	if err != nil {
		// Unreachable: the spec holds strings, integers and times only.
		panic("summarize: marshal spec: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// The size is measured as the spec will be written: with its content hash, and with what the
// pusher adds after Summarize (generatedAt, and a little room for heartbeatInterval).
var (
	hashPlaceholder = strings.Repeat("0", sha256.Size*2)
	timePlaceholder = metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
)

const pusherRoom = 64

func size(spec policyhubv1.PolicyReportSummarySpec) int {
	spec.ContentHash = hashPlaceholder
	spec.GeneratedAt = &timePlaceholder
	data, err := json.Marshal(spec)
	if err != nil {
		panic("summarize: marshal spec: " + err.Error())
	}
	return len(data) + pusherRoom
}

// assemble builds the spec from the kept entries, in the API's order: policies by (namespace,
// name, kind), applications by (namespace, name, policy), violations most important first.
func assemble(base policyhubv1.PolicyReportSummarySpec, pols []policyhubv1.PolicySummary, apps []policyhubv1.ApplicationSummary, viols []policyhubv1.Violation) policyhubv1.PolicyReportSummarySpec {
	spec := base
	if len(pols) > 0 {
		spec.Policies = slices.SortedFunc(slices.Values(pols), comparePolicyKey)
	}
	if len(apps) > 0 {
		spec.Applications = slices.SortedFunc(slices.Values(apps), compareApplicationKey)
	}
	if len(viols) > 0 {
		spec.Violations = slices.Clone(viols)
	}
	return spec
}

func truncation(pols, apps int, viols int64) *policyhubv1.Truncation {
	if pols == 0 && apps == 0 && viols == 0 {
		return nil
	}
	return &policyhubv1.Truncation{Policies: int32(pols), Applications: int32(apps), Violations: viols}
}

func copyEngine(e policyhubv1.EngineInfo) policyhubv1.EngineInfo {
	// A set: sorted, so the order the collector found the APIs in does not change the hash.
	if e.ReportAPIs != nil {
		e.ReportAPIs = slices.Sorted(slices.Values(e.ReportAPIs))
	}
	return e
}

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
	// lastBlock is the newest refused admission of the policy.
	lastBlock *collect.Block
	severity  tally
	category  tally
	info      collect.PolicyInfo
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

	appIndex   map[app]int32
	apps       []app
	digests    []digest // grouped by application
	blockApps  []int32  // application of each block, -1 for none
	appEntries int      // application entries in all, kept or not

	policies map[collect.PolicyKey]*policy
	refIndex map[string]int32
	refs     []string

	totals  policyhubv1.ResultCounts
	blocked int64
}

func newFold(s collect.Snapshot) *fold {
	return &fold{
		s:        s,
		rawIndex: map[collect.PolicyKey]int32{},
		appIndex: map[app]int32{},
		policies: map[collect.PolicyKey]*policy{},
		refIndex: map[string]int32{},
	}
}

func (f *fold) raw(k collect.PolicyKey) int32 {
	if i, ok := f.rawIndex[k]; ok {
		return i
	}
	i := int32(len(f.raws))
	f.rawIndex[k] = i
	f.raws = append(f.raws, k)
	return i
}

// rawAt is raw for the i-th entry of a digest's Policies. Reports list their policies in much the
// same order: the key found at this position last time is compared before this one is hashed.
func (f *fold) rawAt(i int, k collect.PolicyKey) int32 {
	if i < len(f.hint) && f.raws[f.hint[i]] == k {
		return f.hint[i]
	}
	ri := f.raw(k)
	if i < len(f.hint) {
		f.hint[i] = ri
	} else {
		f.hint = append(f.hint, ri)
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
	a := app{namespace: r.Namespace, name: name}
	if i, ok := f.appIndex[a]; ok {
		return i
	}
	i := int32(len(f.apps))
	f.appIndex[a] = i
	f.apps = append(f.apps, a)
	return i
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
			f.rawAt(i, d.Policies[i].Policy)
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
			p = &policy{key: k, ref: f.ref(policyRef(k)), info: f.info(k)}
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
	if i, ok := f.refIndex[s]; ok {
		return i
	}
	i := int32(len(f.refs))
	f.refIndex[s] = i
	f.refs = append(f.refs, s)
	return i
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
		p.blocked += n
		if p.lastBlock == nil || newerBlock(b, p.lastBlock) {
			p.lastBlock = b
		}
		f.blocked += n
		if a := f.blockApps[i]; a >= 0 {
			appBlocks[a] = append(appBlocks[a], b)
		}
	}

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
		for i := range d.Policies {
			pc := &d.Policies[i]
			p := f.rawPols[f.rawAt(i, pc.Policy)]
			addCounts(&p.counts, pc.Counts)
			addCounts(&f.totals, pc.Counts)
			if !pc.Oldest.IsZero() && (p.oldest.IsZero() || pc.Oldest.Before(p.oldest)) {
				p.oldest = pc.Oldest
			}
			p.severity.add(pc.Severity)
			p.category.add(pc.Category)
			if cur >= 0 {
				addCounts(&entry(p.ref).counts, pc.Counts)
			}
		}
		for i := range d.Violations {
			v := &d.Violations[i]
			p := f.rawPols[f.rawIndex[v.Policy]]
			p.severity.add(v.Severity)
			p.category.add(v.Category)
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

// lastBlocked is the API form of a policy's newest block.
func lastBlocked(b *collect.Block) *policyhubv1.BlockedAdmission {
	if b == nil {
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

// topPolicies is the n policies to keep, most failing first, and how many policies there are.
func (f *fold) topPolicies(n int) ([]policyhubv1.PolicySummary, int) {
	top := newTopK(n, comparePolicyPriority)
	for _, p := range f.policies {
		top.offer(policyhubv1.PolicySummary{
			Name:         p.key.Name,
			Namespace:    p.key.Namespace,
			Kind:         p.key.Kind,
			Title:        policyhubv1.CutUTF8(p.info.Title, maxTitle),
			Category:     cmp.Or(p.info.Category, p.category.best()),
			Severity:     p.resolvedSeverity(),
			Results:      p.counts,
			OldestResult: resultTime(p.oldest),
			Blocked:      p.blocked,
			LastBlocked:  lastBlocked(p.lastBlock),
		})
	}
	return top.sorted(), len(f.policies)
}

// resultTime is the API form of a result's time (nil when unknown), in whole seconds as reports have it.
func resultTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}

// resolvedSeverity is the policy's severity: its annotation, else what its results say most often.
func (p *policy) resolvedSeverity() string {
	return cmp.Or(p.info.Severity, p.severity.best())
}

func (f *fold) applicationSummaries(kept []appEntry) []policyhubv1.ApplicationSummary {
	out := make([]policyhubv1.ApplicationSummary, len(kept))
	for i, e := range kept {
		a := f.apps[e.app]
		out[i] = policyhubv1.ApplicationSummary{Namespace: a.namespace, Name: a.name, Policy: f.refs[e.ref], Results: e.counts, Blocked: e.blocked}
	}
	return out
}

// compareAppEntryPriority ranks application entries for keeping: most fail+error, most results,
// most blocked, then by key.
func (f *fold) compareAppEntryPriority(a, b appEntry) int {
	if c := cmp.Or(
		cmp.Compare(violations(b.counts), violations(a.counts)),
		cmp.Compare(total(b.counts), total(a.counts)),
		cmp.Compare(b.blocked, a.blocked),
	); c != 0 {
		return c
	}
	aa, ba := f.apps[a.app], f.apps[b.app]
	return cmp.Or(
		strings.Compare(aa.namespace, ba.namespace),
		strings.Compare(aa.name, ba.name),
		strings.Compare(f.refs[a.ref], f.refs[b.ref]),
	)
}

// candidate is a violation before conversion: most are compared once against the worst kept one
// and dropped, so they are not converted.
type candidate struct {
	d      *collect.Digest
	v      *collect.Violation
	ref    string
	sev    string
	rank   int
	result string
}

// topViolations keeps the n most important fail and error results, in order, and says how many
// there were in all.
func (f *fold) topViolations(n int) ([]policyhubv1.Violation, int64) {
	top := newTopK(n, compareCandidates)
	var eligible int64
	for _, d := range f.s.Digests {
		if d == nil {
			continue
		}
		for i := range d.Violations {
			v := &d.Violations[i]
			result := resultOf(v.Result)
			if result == "" {
				continue
			}
			eligible++
			p := f.rawPols[f.rawIndex[v.Policy]]
			c := candidate{d: d, v: v, ref: f.refs[p.ref], sev: cmp.Or(v.Severity, p.resolvedSeverity()), result: result}
			c.rank = policyhubv1.SeverityRank(c.sev)
			top.offer(c)
		}
	}
	kept := top.sorted()
	out := make([]policyhubv1.Violation, len(kept))
	for i, c := range kept {
		out[i] = c.violation()
	}
	return out, eligible
}

func (c candidate) violation() policyhubv1.Violation {
	r := c.d.Resource
	v := policyhubv1.Violation{
		Policy:   c.ref,
		Rule:     c.v.Rule,
		Result:   c.result,
		Severity: c.sev,
		Resource: policyhubv1.ResourceRef{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name},
		Message:  policyhubv1.CutUTF8(c.v.Message, collect.MaxMessage),
	}
	if !c.v.Time.IsZero() {
		// As the JSON will carry it (UTC, seconds), so the value equals its round trip.
		t := metav1.NewTime(c.v.Time.UTC().Truncate(time.Second))
		v.Timestamp = &t
	}
	return v
}

// resultOf is the API's spelling of a fail or error result, "" for any other result.
func resultOf(r string) string {
	switch {
	case strings.EqualFold(r, "fail"):
		return "fail"
	case strings.EqualFold(r, "error"):
		return "error"
	}
	return ""
}

// compareCandidates is the order of spec.violations: most severe, newest, then every field that
// reaches the output, so that equal candidates convert to equal violations and ties cannot make
// the result depend on the input's order.
func compareCandidates(a, b candidate) int {
	if c := cmp.Compare(a.rank, b.rank); c != 0 { // most severe first
		return c
	}
	if c := b.v.Time.Compare(a.v.Time); c != 0 {
		return c
	}
	ar, br := a.d.Resource, b.d.Resource
	if c := cmp.Or(
		strings.Compare(ar.Namespace, br.Namespace),
		strings.Compare(ar.Name, br.Name),
		strings.Compare(a.ref, b.ref),
		strings.Compare(a.v.Rule, b.v.Rule),
		strings.Compare(ar.Kind, br.Kind),
		strings.Compare(ar.APIVersion, br.APIVersion),
		strings.Compare(a.result, b.result),
		strings.Compare(a.sev, b.sev),
	); c != 0 {
		return c
	}
	return strings.Compare(a.v.Message, b.v.Message)
}

// topK keeps the k least items by cmp (the most important, for the orders here) in a heap whose
// root is the worst kept: most items are compared once with it and dropped, never sorted.
type topK[T any] struct {
	k    int
	cmp  func(a, b T) int
	heap []T
}

func newTopK[T any](k int, cmp func(a, b T) int) *topK[T] {
	return &topK[T]{k: k, cmp: cmp}
}

func (t *topK[T]) offer(x T) {
	h := t.heap
	switch {
	case len(h) < t.k:
		h = append(h, x)
		for i := len(h) - 1; i > 0; {
			parent := (i - 1) / 2
			if t.cmp(h[parent], h[i]) >= 0 {
				break
			}
			h[parent], h[i] = h[i], h[parent]
			i = parent
		}
		t.heap = h
	case len(h) > 0 && t.cmp(x, h[0]) < 0:
		h[0] = x
		for i := 0; ; {
			worst, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && t.cmp(h[l], h[worst]) > 0 {
				worst = l
			}
			if r < len(h) && t.cmp(h[r], h[worst]) > 0 {
				worst = r
			}
			if worst == i {
				break
			}
			h[i], h[worst] = h[worst], h[i]
			i = worst
		}
	}
}

// sorted returns the kept items, best first.
func (t *topK[T]) sorted() []T {
	slices.SortFunc(t.heap, t.cmp)
	return t.heap
}

func comparePolicyKey(a, b policyhubv1.PolicySummary) int {
	return cmp.Or(
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Kind, b.Kind),
	)
}

// comparePolicyPriority ranks policies for keeping: most fail+error, most results, most blocked.
func comparePolicyPriority(a, b policyhubv1.PolicySummary) int {
	return cmp.Or(
		cmp.Compare(violations(b.Results), violations(a.Results)),
		cmp.Compare(total(b.Results), total(a.Results)),
		cmp.Compare(b.Blocked, a.Blocked),
		comparePolicyKey(a, b),
	)
}

func compareApplicationKey(a, b policyhubv1.ApplicationSummary) int {
	return cmp.Or(
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Policy, b.Policy),
	)
}

func violations(c policyhubv1.ResultCounts) int64 { return c.Fail + c.Error }

func total(c policyhubv1.ResultCounts) int64 { return c.Pass + c.Fail + c.Warn + c.Error + c.Skip }

// tally counts the values a field takes; a policy's results almost always agree, so a short slice
// beats a map.
type tally []tallyEntry

type tallyEntry struct {
	value string
	n     int
}

func (t *tally) add(v string) {
	if v == "" {
		return
	}
	for i := range *t {
		if (*t)[i].value == v {
			(*t)[i].n++
			return
		}
	}
	*t = append(*t, tallyEntry{value: v, n: 1})
}

// best is the most frequent value, the lexically first among equals.
func (t tally) best() string {
	var b tallyEntry
	for _, e := range t {
		if e.n > b.n || (e.n == b.n && e.value < b.value) {
			b = e
		}
	}
	return b.value
}
