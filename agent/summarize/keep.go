package summarize

import (
	"cmp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// What a bounded summary keeps: the most important policies, applications and violations, in
// the API's form.

// topPolicies is the n policies to keep, most failing first, and how many policies there are
// (shadows are none of them).
func (f *fold) topPolicies(n int) ([]policyhubv1.PolicySummary, int) {
	top := newTopK(n, comparePolicyPriority)
	all := 0
	for _, p := range f.policies {
		if p.shadow {
			continue // reported apart, in spec.shadows
		}
		all++
		top.offer(policyhubv1.PolicySummary{
			Name:           p.key.Name,
			Namespace:      p.key.Namespace,
			Kind:           p.key.Kind,
			Engine:         engineNamed(p.key.Engine),
			Title:          policyhubv1.CutUTF8(p.info.Title, policyhubv1.MaxSummaryTitleLength),
			Category:       policyhubv1.CutUTF8(cmp.Or(p.info.Category, p.category.best()), policyhubv1.MaxSummaryCategoryLength),
			Severity:       policyhubv1.CutUTF8(p.resolvedSeverity(), policyhubv1.MaxSummarySeverityLength),
			Results:        p.counts,
			OldestResult:   resultTime(p.oldest),
			Blocked:        p.blocked,
			BlockedDryRuns: p.blockedDryRuns,
			LastBlocked:    lastBlocked(p.lastBlock),
		})
	}
	return top.sorted(), all
}

// topExceptions is the n exceptions to keep, most results first, ties by name (the API's order),
// and how many exceptions there are.
func (f *fold) topExceptions(n int) ([]policyhubv1.ExceptionResults, int) {
	top := newTopK(n, compareExceptionPriority)
	for name, results := range f.exceptions {
		top.offer(policyhubv1.ExceptionResults{Name: name, Results: results})
	}
	return top.sorted(), len(f.exceptions)
}

// topNamespaces is the n namespaces to keep, most fail and error results first, and how many
// namespaces there are.
func (f *fold) topNamespaces(n int) ([]policyhubv1.NamespaceSummary, int) {
	top := newTopK(n, compareNamespacePriority)
	for name, c := range f.namespaces {
		top.offer(policyhubv1.NamespaceSummary{Namespace: policyhubv1.CutUTF8(name, policyhubv1.MaxSummaryNamespaceLength), Results: c.counts, Blocked: c.blocked})
	}
	return top.sorted(), len(f.namespaces)
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
			if result == "" || f.rawPols[f.rawIndex[v.Policy]].shadow {
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
		Rule:     policyhubv1.CutUTF8(c.v.Rule, policyhubv1.MaxSummaryRuleLength),
		Result:   c.result,
		Severity: policyhubv1.CutUTF8(c.sev, policyhubv1.MaxSummarySeverityLength),
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

// engineNamed is the engine a summary names: none for Kyverno, whose results every summary has
// always held (the hub reads none as Kyverno), so its summaries stay as they were.
func engineNamed(e policyhubv1.PolicyEngine) policyhubv1.PolicyEngine {
	if e == policyhubv1.EngineKyverno {
		return ""
	}
	return e
}
