package shard

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// DefaultLoadFactor bounds a replica's clusters at this many times the mean: the most loaded
// replica holds at most ⌈1.25 × clusters / replicas⌉ (unless pins put more there).
const DefaultLoadFactor = 1.25

// pointsPerReplica is how many points each replica has on the ring: enough that the arcs even
// out (the load bound does the rest), few enough that a ring of dozens of replicas is tiny.
const pointsPerReplica = 128

// Cluster is a cluster to place, and the replica it is pinned to ("" for none).
type Cluster struct {
	Name string
	Pin  string
}

// Assignment says which replica owns each cluster.
type Assignment struct {
	owner    map[string]string
	load     map[string]int
	replicas []string
	ring     ring
}

// Owner is the replica that owns cluster ("" when there is no replica, or the cluster was not
// assigned).
func (a Assignment) Owner(cluster string) string { return a.owner[cluster] }

// Load is how many clusters replica owns.
func (a Assignment) Load(replica string) int { return a.load[replica] }

// Clusters is how many clusters are assigned.
func (a Assignment) Clusters() int { return len(a.owner) }

// Assign gives every cluster exactly one of replicas by consistent hashing with bounded loads
// (Mirrokni, Thorup and Zadimoghaddam, 2018): a cluster goes to the first replica clockwise from
// its hash on a ring of the replicas' points that holds fewer than ⌈loadFactor × clusters /
// replicas⌉ clusters. A cluster pinned to a live replica goes there first, whatever its load.
// The result depends only on the names, so every replica computes the same one; a replica
// joining or leaving moves about its share of clusters, not all of them. loadFactor < 1 means
// DefaultLoadFactor.
func Assign(clusters []Cluster, replicas []string, loadFactor float64) Assignment {
	a := Assignment{owner: make(map[string]string, len(clusters)), load: map[string]int{}}
	replicas = slices.Compact(slices.Sorted(slices.Values(replicas)))
	a.replicas = replicas
	if len(replicas) == 0 {
		return a
	}
	a.ring = newRing(replicas)
	if len(clusters) == 0 {
		return a
	}
	if loadFactor < 1 {
		loadFactor = DefaultLoadFactor
	}
	capacity := int(math.Ceil(loadFactor * float64(len(clusters)) / float64(len(replicas))))
	live := map[string]bool{}
	for _, r := range replicas {
		live[r] = true
	}
	ring := a.ring
	free := make([]Cluster, 0, len(clusters))
	for _, c := range clusters {
		if _, done := a.owner[c.Name]; done {
			continue
		}
		if live[c.Pin] {
			a.owner[c.Name] = c.Pin
			a.load[c.Pin]++
			continue
		}
		free = append(free, c)
	}
	// Clusters take their places in the order of their hashes, which no list order changes: the
	// same clusters and replicas give the same assignment in every replica.
	hashes := make(map[string]uint64, len(free))
	for _, c := range free {
		hashes[c.Name] = hashOf(c.Name)
	}
	sort.Slice(free, func(i, j int) bool {
		hi, hj := hashes[free[i].Name], hashes[free[j].Name]
		if hi != hj {
			return hi < hj
		}
		return free[i].Name < free[j].Name
	})
	for _, c := range free {
		if _, done := a.owner[c.Name]; done {
			continue
		}
		r := ring.first(hashes[c.Name], func(r string) bool { return a.load[r] < capacity })
		a.owner[c.Name] = r
		a.load[r]++
	}
	return a
}

// ring is the replicas' points, sorted by hash.
type ring struct {
	hashes   []uint64
	replicas []string
}

func newRing(replicas []string) ring {
	type point struct {
		hash    uint64
		replica string
	}
	points := make([]point, 0, len(replicas)*pointsPerReplica)
	var buf [8]byte
	for _, r := range replicas {
		for i := range pointsPerReplica {
			binary.BigEndian.PutUint64(buf[:], uint64(i))
			points = append(points, point{hashOf(r + "#" + string(buf[:])), r})
		}
	}
	sort.Slice(points, func(i, j int) bool {
		if points[i].hash != points[j].hash {
			return points[i].hash < points[j].hash
		}
		return points[i].replica < points[j].replica
	})
	out := ring{hashes: make([]uint64, len(points)), replicas: make([]string, len(points))}
	for i, p := range points {
		out.hashes[i], out.replicas[i] = p.hash, p.replica
	}
	return out
}

// first is the first replica clockwise from h that fits; every replica fits when none does (it
// cannot happen with a load factor ≥ 1, but a cluster must have an owner).
func (r ring) first(h uint64, fits func(string) bool) string {
	start := sort.Search(len(r.hashes), func(i int) bool { return r.hashes[i] >= h })
	for i := range r.hashes {
		if rep := r.replicas[(start+i)%len(r.hashes)]; fits(rep) {
			return rep
		}
	}
	return r.replicas[start%len(r.hashes)]
}

// hashOf is FNV-1a with a final mix (splitmix64's), so that names differing in one character
// land far apart on the ring. It must never change: replicas of different versions would
// disagree (the clusters' sync Leases keep them apart, but clusters would move).
func hashOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Replicas are the replicas the assignment was made over, sorted.
func (a Assignment) Replicas() []string { return a.replicas }

// Same says whether a and b give every cluster the same owner over the same replicas.
func (a Assignment) Same(b Assignment) bool {
	if len(a.owner) != len(b.owner) || !slices.Equal(a.replicas, b.replicas) {
		return false
	}
	for c, r := range a.owner {
		if b.owner[c] != r {
			return false
		}
	}
	return true
}

// Writer is the replica that writes what is shared by all clusters of key (a declaration's
// status): the first replica clockwise from key's hash, so that declarations spread over the
// replicas as clusters do, and each moves only when the replicas change. "" when there is none.
func (a Assignment) Writer(key string) string {
	if len(a.ring.hashes) == 0 {
		return ""
	}
	return a.ring.first(hashOf(key), func(string) bool { return true })
}

// Works says whether replica works cluster: it owns it, or nobody does (the cluster is not in
// the inventory: it left the fleet, and what was synced there must still be let go of) and the
// cluster's name hashes to it.
func (a Assignment) Works(replica, cluster string) bool {
	if replica == "" {
		return false
	}
	owner, ok := a.owner[cluster]
	if ok {
		return owner == replica
	}
	return a.Writer("cluster/"+cluster) == replica
}

// Owned are the clusters replica owns, sorted.
func (a Assignment) Owned(replica string) []string {
	var out []string
	for c, r := range a.owner {
		if r == replica {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Inherited are the clusters replica owns in next that prev gave to a replica next was not made
// over (one that died or left), sorted: their previous owner may have left them mid-pass, and
// they have waited for membership to judge it gone.
func Inherited(prev, next Assignment, replica string) []string {
	var out []string
	for c, r := range next.owner {
		if was := prev.owner[c]; r == replica && was != "" && was != replica && !slices.Contains(next.replicas, was) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// FromSecrets are the clusters to assign: one per cluster-gateway credential Secret (named after
// its cluster), pinned by its policyhubv1.LabelPinnedReplica label.
func FromSecrets(secrets []metav1.PartialObjectMetadata) []Cluster {
	clusters := make([]Cluster, 0, len(secrets))
	for _, s := range secrets {
		clusters = append(clusters, Cluster{Name: s.Name, Pin: s.Labels[policyhubv1.LabelPinnedReplica]})
	}
	return clusters
}
