package v1alpha1

import "math"

// What a summary's engine facts mean for the readers (hub rollout gate, metrics, CLI, web view):
// one reading of the inventory's counts and of the results a cluster's Kyverno writes.

// Total is every legacy object the inventory counts, whatever its kind and owner: what Kyverno
// 1.20's upgrade gate checks. A negative count (an older CRD let it through) counts 0; the sum
// saturates instead of wrapping.
func (l *LegacyInventory) Total() int64 {
	if l == nil {
		return 0
	}
	var total int64
	for _, c := range l.Counts {
		total = addCount(total, c.Count)
	}
	return total
}

// Owned is the legacy objects of owner the inventory counts.
func (l *LegacyInventory) Owned(owner LegacyOwner) int64 {
	if l == nil {
		return 0
	}
	var total int64
	for _, c := range l.Counts {
		if c.Owner == owner {
			total = addCount(total, c.Count)
		}
	}
	return total
}

// ReportsResult says whether the cluster's Kyverno writes results of kind result (pass, fail,
// warn, error, skip) to its reports: false when its --allowedResults leaves the kind out, so a
// summary's count of it is unknown rather than zero.
func (e *EngineInfo) ReportsResult(result string) bool {
	if e == nil || e.Kyverno == nil || len(e.Kyverno.ReportedResults) == 0 {
		return true
	}
	for _, r := range e.Kyverno.ReportedResults {
		if r == result {
			return true
		}
	}
	return false
}

// addCount is a + b for counts: a negative one is 0, the sum saturates.
func addCount(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
