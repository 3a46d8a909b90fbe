package shard

import (
	"fmt"
	"slices"
	"testing"
)

func names(prefix string, n int) []Cluster {
	out := make([]Cluster, n)
	for i := range out {
		out[i] = Cluster{Name: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return out
}

func replicaNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("policyhub-hub-%d", i)
	}
	return out
}

// maxLoad is the most clusters one of replicas owns.
func maxLoad(a Assignment, replicas []string) int {
	most := 0
	for _, r := range replicas {
		most = max(most, a.Load(r))
	}
	return most
}

// moved counts the clusters whose owner differs between a and b.
func moved(clusters []Cluster, a, b Assignment) int {
	n := 0
	for _, c := range clusters {
		if a.Owner(c.Name) != b.Owner(c.Name) {
			n++
		}
	}
	return n
}

func TestAssignGivesEveryClusterOneLiveReplicaWithinTheBound(t *testing.T) {
	for _, tc := range []struct {
		clusters, replicas int
	}{{1, 1}, {1, 3}, {2, 3}, {10, 3}, {100, 2}, {1000, 3}, {3000, 3}, {3001, 7}, {10000, 10}} {
		t.Run(fmt.Sprintf("%dx%d", tc.clusters, tc.replicas), func(t *testing.T) {
			clusters, replicas := names("c", tc.clusters), replicaNames(tc.replicas)
			a := Assign(clusters, replicas, 0)
			if a.Clusters() != tc.clusters {
				t.Fatalf("assigned %d clusters, want %d", a.Clusters(), tc.clusters)
			}
			sum := 0
			for _, r := range replicas {
				sum += a.Load(r)
			}
			if sum != tc.clusters {
				t.Errorf("loads add up to %d, want %d", sum, tc.clusters)
			}
			for _, c := range clusters {
				if !slices.Contains(replicas, a.Owner(c.Name)) {
					t.Fatalf("cluster %s owned by %q, not a live replica", c.Name, a.Owner(c.Name))
				}
			}
			bound := (tc.clusters*5 + tc.replicas*4 - 1) / (tc.replicas * 4) // ⌈1.25 × n / r⌉
			if most := maxLoad(a, replicas); most > bound {
				t.Errorf("the most loaded replica owns %d clusters, above the bound %d", most, bound)
			}
		})
	}
}

func TestAssignIsTheSameWhateverTheOrder(t *testing.T) {
	clusters, replicas := names("c", 500), replicaNames(4)
	a := Assign(clusters, replicas, 0)
	reversedClusters := slices.Clone(clusters)
	slices.Reverse(reversedClusters)
	reversedReplicas := slices.Clone(replicas)
	slices.Reverse(reversedReplicas)
	b := Assign(reversedClusters, append(reversedReplicas, replicas[0]), 0) // a duplicate counts once
	if n := moved(clusters, a, b); n != 0 {
		t.Errorf("%d clusters have another owner when the lists come in another order", n)
	}
}

func TestAssignHonoursPinsToLiveReplicasOnly(t *testing.T) {
	clusters, replicas := names("c", 30), replicaNames(3)
	// Twenty clusters pinned to one replica: more than its bound (13), and pins win.
	for i := range 20 {
		clusters[i].Pin = replicas[1]
	}
	clusters[25].Pin = "policyhub-hub-gone"
	a := Assign(clusters, replicas, 0)
	for i := range 20 {
		if got := a.Owner(clusters[i].Name); got != replicas[1] {
			t.Errorf("%s pinned to %s is owned by %s", clusters[i].Name, replicas[1], got)
		}
	}
	if got := a.Owner(clusters[25].Name); !slices.Contains(replicas, got) {
		t.Errorf("a cluster pinned to a replica that does not run is owned by %q, want a live one", got)
	}
	if got := a.Load(replicas[1]); got != 20 {
		t.Errorf("the pinned replica owns %d clusters, want only its 20 pinned ones (it is over its bound)", got)
	}
}

func TestAssignWithoutReplicasOrClustersOwnsNothing(t *testing.T) {
	if a := Assign(names("c", 5), nil, 0); a.Owner("c-1") != "" || a.Clusters() != 0 {
		t.Errorf("no replica: c-1 owned by %q, %d clusters assigned", a.Owner("c-1"), a.Clusters())
	}
	if a := Assign(nil, replicaNames(2), 0); a.Clusters() != 0 {
		t.Errorf("no cluster: %d assigned", a.Clusters())
	}
}

// A replica joining takes about its share of the clusters, and the others keep most of theirs;
// one leaving hands over its own clusters and few more.
func TestAssignMovesAboutAShareWhenAReplicaJoinsOrLeaves(t *testing.T) {
	clusters := names("cluster", 3000)
	two, three := Assign(clusters, replicaNames(2), 0), Assign(clusters, replicaNames(3), 0)
	joined := moved(clusters, two, three)
	share := len(clusters) / 3
	if joined < share*9/10 || joined > share*3/2 {
		t.Errorf("a third replica joining moved %d of %d clusters, want about a third (%d), at most half as many again", joined, len(clusters), share)
	}
	// The third replica leaves: its clusters move, and of the others' at most a tenth more.
	back := moved(clusters, three, two)
	ownedByLeaver := three.Load(replicaNames(3)[2])
	if back < ownedByLeaver || back > ownedByLeaver+len(clusters)/10 {
		t.Errorf("the third replica leaving moved %d clusters; it owned %d", back, ownedByLeaver)
	}
}

// BenchmarkAssign assigns a fleet to replicas, and reports the load imbalance (the most loaded
// replica over the mean) and the share of clusters that move when one more replica joins.
func BenchmarkAssign(b *testing.B) {
	for _, tc := range []struct{ clusters, replicas int }{{3000, 3}, {10000, 3}, {10000, 10}} {
		b.Run(fmt.Sprintf("clusters=%d/replicas=%d", tc.clusters, tc.replicas), func(b *testing.B) {
			clusters, replicas := names("cluster", tc.clusters), replicaNames(tc.replicas)
			var a Assignment
			for b.Loop() {
				a = Assign(clusters, replicas, 0)
			}
			mean := float64(tc.clusters) / float64(tc.replicas)
			b.ReportMetric(float64(maxLoad(a, replicas))/mean, "max/mean")
			more := Assign(clusters, replicaNames(tc.replicas+1), 0)
			b.ReportMetric(float64(moved(clusters, a, more))/float64(tc.clusters), "moved-on-join")
		})
	}
}

func TestWriterIsOneLiveReplicaAndSpreads(t *testing.T) {
	replicas := replicaNames(3)
	a := Assign(nil, replicas, 0)
	count := map[string]int{}
	for i := range 300 {
		w := a.Writer(fmt.Sprintf("FleetPolicy//policy-%d", i))
		if !slices.Contains(replicas, w) {
			t.Fatalf("writer %q is not a live replica", w)
		}
		if again := Assign(names("c", 10), replicas, 0).Writer(fmt.Sprintf("FleetPolicy//policy-%d", i)); again != w {
			t.Fatalf("the writer depends on the clusters: %q, then %q", w, again)
		}
		count[w]++
	}
	for _, r := range replicas {
		if count[r] < 50 {
			t.Errorf("replica %s writes %d of 300 declarations' status, want about a third", r, count[r])
		}
	}
	if w := Assign(nil, nil, 0).Writer("x"); w != "" {
		t.Errorf("no replica: writer %q", w)
	}
}

func TestWorksNamesOneReplicaForEveryClusterKnownOrNot(t *testing.T) {
	replicas := replicaNames(3)
	a := Assign(names("c", 20), replicas, 0)
	for _, cluster := range []string{"c-1", "c-7", "gone-1", "gone-2", "gone-3"} {
		n := 0
		for _, r := range replicas {
			if a.Works(r, cluster) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is worked by %d replicas, want exactly one", cluster, n)
		}
	}
	if a.Works("", "c-1") || a.Works("policyhub-hub-9", "c-1") {
		t.Error("a replica that is not live works a cluster")
	}
}

// A replica inherits the clusters it gets from a replica the new assignment was not made over
// (dead or gone); clusters moving between live replicas, or never owned before, are not inherited.
func TestInherited(t *testing.T) {
	clusters := []Cluster{{Name: "c0"}, {Name: "c1"}, {Name: "c2"}, {Name: "c3"}, {Name: "c4", Pin: "b"}, {Name: "c5"}}
	three := Assign(clusters, []string{"a", "b", "c"}, 0)
	for _, tc := range []struct {
		name       string
		prev, next Assignment
		replica    string
		want       func(prev, next Assignment, replica string) []string
	}{
		{"b died: a and c inherit what b owned and they now own", three, Assign(clusters, []string{"a", "c"}, 0), "a", ownedFromDead},
		{"b died, seen by c", three, Assign(clusters, []string{"a", "c"}, 0), "c", ownedFromDead},
		{"d joined: nothing inherited", three, Assign(clusters, []string{"a", "b", "c", "d"}, 0), "d", none},
		{"first assignment: nothing inherited", Assignment{}, three, "a", none},
		{"unchanged", three, three, "a", none},
		{"the dead replica inherits nothing", three, Assign(clusters, []string{"a", "c"}, 0), "b", none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := Inherited(tc.prev, tc.next, tc.replica), tc.want(tc.prev, tc.next, tc.replica)
			if !slices.Equal(got, want) {
				t.Errorf("Inherited = %v, want %v", got, want)
			}
		})
	}
	if got := Inherited(three, Assign(clusters, []string{"a", "c"}, 0), "a"); len(got)+len(Inherited(three, Assign(clusters, []string{"a", "c"}, 0), "c")) != three.Load("b") {
		t.Errorf("a and c inherit %d clusters in all, want all %d of b's", len(got), three.Load("b"))
	}
}

// ownedFromDead are the clusters replica owns in next that b owned in prev.
func ownedFromDead(prev, next Assignment, replica string) []string {
	var out []string
	for _, c := range next.Owned(replica) {
		if prev.Owner(c) == "b" {
			out = append(out, c)
		}
	}
	return out
}

func none(Assignment, Assignment, string) []string { return nil }
