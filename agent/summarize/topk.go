package summarize

import (
	"cmp"
	"slices"
	"strings"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Small order-keeping helpers: a top-k heap, the API orders it keeps by, and a tally of values.

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

// compareExceptionPriority is the order of spec.exceptions, and of keeping them: most results,
// then by name (names are unique, so the order is total).
func compareExceptionPriority(a, b policyhubv1.ExceptionResults) int {
	return cmp.Or(cmp.Compare(b.Results, a.Results), strings.Compare(a.Name, b.Name))
}

// compareNamespacePriority ranks namespaces for keeping: most fail+error, most results, most
// blocked, then by name.
func compareNamespacePriority(a, b policyhubv1.NamespaceSummary) int {
	return cmp.Or(
		cmp.Compare(violations(b.Results), violations(a.Results)),
		cmp.Compare(total(b.Results), total(a.Results)),
		cmp.Compare(b.Blocked, a.Blocked),
		strings.Compare(a.Namespace, b.Namespace),
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
