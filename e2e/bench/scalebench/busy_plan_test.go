package main

import "testing"

func TestBusyPlanMovesAShareOfTheClustersInTurn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		share    float64
		clusters int
		// perRound is how many clusters move fail in each round from 1; every is how many rounds
		// apart each cluster moves.
		perRound, every int
	}{
		{"every cluster every round (today's busy fleet)", 1, 1000, 1000, 1},
		{"a tenth", 0.1, 1000, 100, 10},
		{"a half", 0.5, 10, 5, 2},
		{"a quarter of 4", 0.25, 4, 1, 4},
		{"none", 0, 100, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newBusyPlan("fail", tc.share, tc.clusters)
			if err != nil {
				t.Fatal(err)
			}
			for ci := range tc.clusters {
				if !p.movesFail(ci, 0) {
					t.Fatalf("cluster %d: round 0 sets every count, fail too", ci)
				}
			}
			last := make([]int, tc.clusters)
			for k := 1; k <= 40; k++ {
				moved := 0
				for ci := range tc.clusters {
					if !p.movesFail(ci, k) {
						continue
					}
					moved++
					if last[ci] > 0 && k-last[ci] != tc.every {
						t.Fatalf("cluster %d moved in rounds %d and %d: want %d apart", ci, last[ci], k, tc.every)
					}
					last[ci] = k
				}
				if moved != tc.perRound {
					t.Fatalf("round %d: %d clusters moved fail, want %d", k, moved, tc.perRound)
				}
			}
		})
	}
}

func TestBusyPlanCounts(t *testing.T) {
	tenth, err := newBusyPlan("fail", 0.1, 10)
	if err != nil {
		t.Fatal(err)
	}
	all, err := newBusyPlan("fail", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := newBusyPlan("pass", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	// With a tenth of 10 clusters, cluster 9 moves fail when k/10 + 0.9 crosses: rounds 1, 11, 21.
	for _, tc := range []struct {
		name          string
		p             busyPlan
		ci, k         int
		fail, pass    int
		counted       bool
		wantMovesFail bool
	}{
		{"round 0 sets both", tenth, 9, 0, 0, 0, true, true},
		{"cluster 9 moves fail in round 1", tenth, 9, 1, 1, 0, true, true},
		{"then pass", tenth, 9, 2, 1, 2, false, false},
		{"pass up to round 10", tenth, 9, 10, 1, 10, false, false},
		{"fail again at 11, pass kept", tenth, 9, 11, 11, 10, true, true},
		{"cluster 0 moves fail at round 10 only", tenth, 0, 9, 0, 9, false, false},
		{"cluster 0 at 10", tenth, 0, 10, 10, 9, true, true},
		{"every round moves fail", all, 3, 7, 7, 0, true, true},
		{"pass moves pass only", pass, 3, 7, -1, 7, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail, pass := tc.p.counts(tc.ci, tc.k)
			if fail != tc.fail || pass != tc.pass {
				t.Errorf("counts(%d, %d) = fail %d, pass %d; want %d, %d", tc.ci, tc.k, fail, pass, tc.fail, tc.pass)
			}
			if got := tc.p.counted(tc.ci, tc.k); got != tc.counted {
				t.Errorf("counted = %v, want %v", got, tc.counted)
			}
			if got := tc.p.movesFail(tc.ci, tc.k); got != tc.wantMovesFail {
				t.Errorf("movesFail = %v, want %v", got, tc.wantMovesFail)
			}
		})
	}
}

func TestNewBusyPlanRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		moved    string
		share    float64
		clusters int
	}{
		{"unknown count", "warn", 1, 10},
		{"share above 1", "fail", 1.5, 10},
		{"negative share", "fail", -0.1, 10},
		{"share with pass", "pass", 0.5, 10},
		{"no clusters", "fail", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newBusyPlan(tc.moved, tc.share, tc.clusters); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
