package summarize

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Shadows: report-only copies of a candidate policy (policyhubv1.ShadowPrefix). Their results
// are in the same per-resource reports as every other policy's, and are never compliance: the
// fold counts them nowhere else (policy.shadow). Here each shadow's verdict on each resource is
// compared with its live policy's (its policyhub.io/shadow-of annotation), into spec.shadows.

// shadowEntry is one shadow's comparison, resource by resource.
type shadowEntry struct {
	out policyhubv1.ShadowResults
	// live is the policy the shadow is compared with; hasLive is false when it names none (a
	// new policy, or a shadow known from reports only): every resource it fails is newly failing.
	live    collect.PolicyKey
	hasLive bool
	// newly and differing keep the first resources by namespace, kind and name, whatever order
	// the reports come in: the same cluster gives the same summary, and no push.
	newly     *topK[policyhubv1.ResourceRef]
	differing *topK[policyhubv1.VerdictDifference]
}

// shadowResults compares every shadow with its live policy: one entry per shadow, by namespace,
// name and kind, at most MaxSummaryShadows (those after are left out, and still count nowhere;
// cut says how many).
func (f *fold) shadowResults() (out []policyhubv1.ShadowResults, cut int) {
	entries, cut := f.shadowEntries()
	if len(entries) == 0 {
		return nil, cut
	}
	f.compareShadows(entries)
	out = make([]policyhubv1.ShadowResults, len(entries))
	for i, e := range entries {
		out[i] = e.out
		out[i].FirstNewlyFailing = nilIfEmpty(e.newly.sorted())
		out[i].FirstDiffering = nilIfEmpty(e.differing.sorted())
	}
	return out, cut
}

// shadowEntries are the shadows the summary reports: those the collector watches (so a shadow
// with no result yet has an entry, saying which live policy and version it is) and those only
// reports name (with no shadow-of or content hash to say).
func (f *fold) shadowEntries() (entries []*shadowEntry, cut int) {
	keys := map[collect.PolicyKey]struct{}{}
	for k, p := range f.policies {
		if p.shadow {
			keys[k] = struct{}{}
		}
	}
	for k := range f.s.Policies {
		if policyhubv1.IsShadowName(k.Name) {
			keys[k] = struct{}{}
		}
	}
	for k := range f.s.Shadows {
		if policyhubv1.IsShadowName(k.Name) {
			keys[k] = struct{}{}
		}
	}
	sorted := slices.SortedFunc(maps.Keys(keys), func(a, b collect.PolicyKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	cut = max(len(sorted)-policyhubv1.MaxSummaryShadows, 0)
	sorted = sorted[:len(sorted)-cut]
	entries = make([]*shadowEntry, len(sorted))
	for i, k := range sorted {
		info := f.s.Shadows[k]
		e := &shadowEntry{
			out: policyhubv1.ShadowResults{
				Name: k.Name, Namespace: k.Namespace, Kind: k.Kind,
				Of:          policyhubv1.CutUTF8(info.Of, collect.MaxShadowOf),
				ContentHash: policyhubv1.CutUTF8(info.ContentHash, collect.MaxShadowContentHash),
			},
			newly:     newTopK(policyhubv1.MaxShadowNamed, compareResourceRef),
			differing: newTopK(policyhubv1.MaxShadowNamed, compareVerdictDifference),
		}
		// A value cut by the collector ends in a mark no name holds: it pairs with nothing.
		if kind, ns, name, ok := policyhubv1.ParseShadowOf(info.Of); ok {
			e.live, e.hasLive = collect.PolicyKey{Kind: kind, Namespace: ns, Name: name}, true
		}
		entries[i] = e
	}
	return entries, cut
}

// compareShadows judges every resource a shadow or its live policy has a result for. Each raw
// key of the reports is the results of at most one shadow (its resolved policy) and of the live
// policy of any number of shadows: a report that does not say the kind (wgpolicyk8s.io without
// a source) is the live policy's by namespace and name.
func (f *fold) compareShadows(entries []*shadowEntry) {
	index := make(map[collect.PolicyKey]int32, len(entries))
	for i, e := range entries {
		index[collect.PolicyKey{Kind: e.out.Kind, Namespace: e.out.Namespace, Name: e.out.Name}] = int32(i)
	}
	shadowOf := make([]int32, len(f.raws))
	liveOf := make([][]int32, len(f.raws))
	involved := false
	for ri, raw := range f.raws {
		shadowOf[ri] = -1
		if p := f.rawPols[ri]; p.shadow {
			if i, ok := index[p.key]; ok {
				shadowOf[ri], involved = i, true
			}
		}
		for i, e := range entries {
			if e.hasLive && raw.Namespace == e.live.Namespace && raw.Name == e.live.Name && (raw.Kind == "" || raw.Kind == e.live.Kind) {
				liveOf[ri] = append(liveOf[ri], int32(i))
				involved = true
			}
		}
	}
	if !involved {
		return // no result of any shadow or live policy: every entry stays at zero
	}
	shadow := make([]collect.Counts, len(entries))
	live := make([]collect.Counts, len(entries))
	touched := make([]int32, 0, len(entries))
	inTouched := make([]bool, len(entries))
	touch := func(i int32) {
		if !inTouched[i] {
			inTouched[i] = true
			touched = append(touched, i)
		}
	}
	for _, d := range f.digests {
		for i := range d.Policies {
			pc := &d.Policies[i]
			ri := f.rawAt(i, pc)
			if s := shadowOf[ri]; s >= 0 {
				addResultCounts(&shadow[s], pc.Counts)
				touch(s)
			}
			for _, s := range liveOf[ri] {
				addResultCounts(&live[s], pc.Counts)
				touch(s)
			}
		}
		for _, s := range touched {
			entries[s].judge(d.Resource, verdict(shadow[s]), verdict(live[s]))
			shadow[s], live[s], inTouched[s] = collect.Counts{}, collect.Counts{}, false
		}
		touched = touched[:0]
	}
}

// judge counts one resource the shadow or its live policy (or both) gave a verdict.
func (e *shadowEntry) judge(r collect.Resource, shadow, live policyhubv1.Verdict) {
	none, skip := policyhubv1.VerdictNone, policyhubv1.VerdictSkip
	// A skip says the policy did not apply to the resource, as no result does (a legacy rule
	// skipped in background scans, its conversion evaluated at admission only): alike.
	if shadow == none && (live == none || live == skip) {
		return
	}
	o := &e.out
	ref := resourceRef(r)
	if shadow != none {
		o.Resources++
	}
	if shadow == policyhubv1.VerdictFail {
		o.WouldFail++
		if live != policyhubv1.VerdictFail {
			o.NewlyFailing++
			e.newly.offer(ref)
		}
	}
	switch {
	case shadow != none && (shadow == live || shadow == skip && live == none):
		o.Same++
		return
	case shadow != none && live != none:
		o.Differ++
	case shadow != none:
		o.OnlyShadow++
	default:
		o.OnlyLive++
	}
	e.differing.offer(policyhubv1.VerdictDifference{Resource: ref, Shadow: shadow, Live: live})
}

// verdict is a policy's verdict on one resource, all its rules' results together: fail when any
// failed or erred, else pass when any passed (a warning passes), else skip when any was skipped.
func verdict(c collect.Counts) policyhubv1.Verdict {
	switch {
	case c.Fail > 0 || c.Error > 0:
		return policyhubv1.VerdictFail
	case c.Pass > 0 || c.Warn > 0:
		return policyhubv1.VerdictPass
	case c.Skip > 0:
		return policyhubv1.VerdictSkip
	}
	return policyhubv1.VerdictNone
}

func addResultCounts(dst *collect.Counts, c collect.Counts) {
	dst.Pass += c.Pass
	dst.Fail += c.Fail
	dst.Warn += c.Warn
	dst.Error += c.Error
	dst.Skip += c.Skip
}

// resourceRef is the API form of a resource, each field cut to its bound.
func resourceRef(r collect.Resource) policyhubv1.ResourceRef {
	return policyhubv1.ResourceRef{
		APIVersion: policyhubv1.CutUTF8(r.APIVersion, policyhubv1.MaxSummaryRefLength),
		Kind:       policyhubv1.CutUTF8(r.Kind, policyhubv1.MaxSummaryKindLength),
		Namespace:  policyhubv1.CutUTF8(r.Namespace, policyhubv1.MaxSummaryNamespaceLength),
		Name:       policyhubv1.CutUTF8(r.Name, policyhubv1.MaxSummaryNameLength),
	}
}

// compareResourceRef is the order of a shadow's named resources: namespace, kind, name, then
// API version, so that the order is total.
func compareResourceRef(a, b policyhubv1.ResourceRef) int {
	return cmp.Or(
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Kind, b.Kind),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.APIVersion, b.APIVersion),
	)
}

func compareVerdictDifference(a, b policyhubv1.VerdictDifference) int {
	return cmp.Or(
		compareResourceRef(a.Resource, b.Resource),
		strings.Compare(string(a.Shadow), string(b.Shadow)),
		strings.Compare(string(a.Live), string(b.Live)),
	)
}

// cutShadows is the first n shadow entries, each naming at most named resources of each list.
func cutShadows(shadows []policyhubv1.ShadowResults, n, named int) []policyhubv1.ShadowResults {
	if n == 0 {
		return nil
	}
	out := slices.Clone(shadows[:n])
	for i := range out {
		out[i].FirstNewlyFailing = nilIfEmpty(out[i].FirstNewlyFailing[:min(named, len(out[i].FirstNewlyFailing))])
		out[i].FirstDiffering = nilIfEmpty(out[i].FirstDiffering[:min(named, len(out[i].FirstDiffering))])
	}
	return out
}

// nilIfEmpty is nil for an empty list: a summary holds nil where it names nothing, whether or
// not something was cut, so that equal summaries are equal values too.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}
