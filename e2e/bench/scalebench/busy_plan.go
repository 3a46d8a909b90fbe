package main

import (
	"fmt"
	"math"
)

// shareScale is the resolution of -busy-fail-share: parts per million, so which clusters move in
// a round is integer arithmetic, the same on every run.
const shareScale = 1_000_000

// busyPlan says what each busy round changes in each cluster. Round 0 is every cluster's first
// content: it sets the moved counts. Under -busy-moves pass every later round moves the pass
// count. Under -busy-moves fail a round moves the fail count of a share of the clusters
// (-busy-fail-share) and the pass count of all the others: a fleet whose violations change in a
// few clusters at a time while pods churn everywhere, which is what the agent's pacing tells
// apart (fail counts are pushed at once, pass counts at the cluster's share).
type busyPlan struct {
	moved    string // "pass" or "fail"
	share    int64  // parts of shareScale
	clusters int64
}

func newBusyPlan(moved string, failShare float64, clusters int) (busyPlan, error) {
	if moved != "pass" && moved != "fail" {
		return busyPlan{}, fmt.Errorf("-busy-moves %q: pass or fail", moved)
	}
	if math.IsNaN(failShare) || failShare < 0 || failShare > 1 {
		return busyPlan{}, fmt.Errorf("-busy-fail-share %v: between 0 and 1", failShare)
	}
	if moved == "pass" && failShare != 1 {
		return busyPlan{}, fmt.Errorf("-busy-fail-share %v applies to -busy-moves fail only", failShare)
	}
	if clusters < 1 {
		return busyPlan{}, fmt.Errorf("busy fleet: %d clusters", clusters)
	}
	return busyPlan{moved: moved, share: int64(math.Round(failShare * shareScale)), clusters: int64(clusters)}, nil
}

// movesFail says whether round k moves cluster ci's fail count. Each cluster carries a phase
// ci/clusters; it moves whenever k·share + phase crosses a whole number, so a share F of the
// clusters moves in every round, and each cluster once every 1/F rounds, in turn.
func (p busyPlan) movesFail(ci, k int) bool {
	if p.moved != "fail" {
		return false
	}
	if k <= 0 {
		return true
	}
	return p.turn(ci, k) != p.turn(ci, k-1)
}

// turn is ⌊k·share + ci/clusters⌋ in integers: k·share·clusters ≤ ~1e16 for the fleets run here.
func (p busyPlan) turn(ci, k int) int64 {
	return (int64(k)*p.share*p.clusters + int64(ci)*shareScale) / (shareScale * p.clusters)
}

// counted says whether round k of cluster ci changes the count the busy fleet watches in the
// slices (its latency is measured): the fail count under -busy-moves fail, the pass count under
// -busy-moves pass.
func (p busyPlan) counted(ci, k int) bool { return p.moved == "pass" || p.movesFail(ci, k) }

// counts are the rounds whose values cluster ci's fail and pass counts hold after round k
// (−1: the count is never moved, the summary's own stays).
func (p busyPlan) counts(ci, k int) (fail, pass int) {
	if p.moved == "pass" {
		return -1, k
	}
	fail, pass = -1, -1
	for j := k; j >= 1 && (fail < 0 || pass < 0); j-- {
		if p.movesFail(ci, j) {
			if fail < 0 {
				fail = j
			}
		} else if pass < 0 {
			pass = j
		}
	}
	return max(fail, 0), max(pass, 0)
}
