package statusslice

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// MaxSliceBytes bounds the encoded clusters of one slice, well under etcd's 1.5 MiB request
// limit: a dry-run plan with diffs may take tens of KiB per cluster, so a slice fills by bytes
// before it fills by count.
const MaxSliceBytes = 512 << 10

// Owner is the declaration whose slices these are.
type Owner struct {
	Kind, Name, UID string
	// Namespace holds the slices: the ApplicationPolicy's own, the hub's for a FleetPolicy.
	Namespace string
}

// Changes are the writes that make a declaration's slices hold its clusters.
type Changes struct {
	// Write are the slices to create (no resourceVersion) or update.
	Write []policyhubv1.ClusterStatusSlice
	// Delete are the slices no longer needed.
	Delete []policyhubv1.ClusterStatusSlice
}

// Split assigns clusters (one entry per name) to slices of at most size clusters and
// MaxSliceBytes, keeping every cluster in the slice that holds it now, so that a change in one
// cluster, or a cluster joining or leaving, rewrites one slice; the slices whose content does not
// change, or changes only in pass, warn or skip counts and report times, are not written. size ≤ 0 or above policyhubv1.MaxClustersPerSlice means the maximum.
func Split(owner Owner, clusters []policyhubv1.ClusterStatus, have []policyhubv1.ClusterStatusSlice, size int) Changes {
	if size <= 0 || size > policyhubv1.MaxClustersPerSlice {
		size = policyhubv1.MaxClustersPerSlice
	}
	wanted := map[string]policyhubv1.ClusterStatus{}
	for _, c := range clusters {
		wanted[c.Name] = c
	}
	type slot struct {
		index    int
		old      *policyhubv1.ClusterStatusSlice
		clusters []policyhubv1.ClusterStatus
		bytes    int
	}
	var slots []*slot
	placed := map[string]bool{}
	var changes Changes
	ordered := append([]policyhubv1.ClusterStatusSlice(nil), have...)
	sort.Slice(ordered, func(i, j int) bool { return indexOf(&ordered[i]) < indexOf(&ordered[j]) })
	for i := range ordered {
		old := &ordered[i]
		index := indexOf(old)
		if index < 0 || old.Name != policyhubv1.ClusterStatusSliceName(owner.Kind, owner.UID, index) {
			changes.Delete = append(changes.Delete, *old) // not one of ours by name: replaced
			continue
		}
		s := &slot{index: index, old: old}
		for _, c := range old.Clusters {
			if n, ok := wanted[c.Name]; ok && !placed[c.Name] {
				placed[c.Name] = true
				s.clusters = append(s.clusters, n)
			}
		}
		slots = append(slots, s)
	}
	var joining []string
	for name := range wanted {
		if !placed[name] {
			joining = append(joining, name)
		}
	}
	sort.Strings(joining)
	if len(joining) > 0 {
		for _, s := range slots { // sizes matter only where clusters join
			for _, c := range s.clusters {
				s.bytes += entryBytes(c)
			}
		}
	}
	next := 0
	for _, s := range slots {
		next = max(next, s.index+1)
	}
	for _, name := range joining {
		c := wanted[name]
		n := entryBytes(c)
		var into *slot
		for _, s := range slots {
			if len(s.clusters) < size && (len(s.clusters) == 0 || s.bytes+n <= MaxSliceBytes) {
				into = s
				break
			}
		}
		if into == nil {
			into = &slot{index: next}
			next++
			slots = append(slots, into)
		}
		into.clusters = append(into.clusters, c)
		into.bytes += n
	}
	for _, s := range slots {
		if len(s.clusters) == 0 {
			if s.old != nil {
				changes.Delete = append(changes.Delete, *s.old)
			}
			continue
		}
		sort.Slice(s.clusters, func(i, j int) bool { return s.clusters[i].Name < s.clusters[j].Name })
		slice := policyhubv1.ClusterStatusSlice{}
		if s.old != nil {
			slice = *s.old.DeepCopy()
		}
		slice.Name = policyhubv1.ClusterStatusSliceName(owner.Kind, owner.UID, s.index)
		slice.Namespace = owner.Namespace
		labels := slice.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		labels[policyhubv1.LabelDeclarationUID] = owner.UID
		slice.Labels = labels
		slice.Declaration = policyhubv1.DeclarationRef{Kind: owner.Kind, Name: owner.Name, UID: owner.UID}
		slice.Clusters = s.clusters
		if s.old != nil && sameState(s.old.Clusters, slice.Clusters) &&
			s.old.Declaration == slice.Declaration && s.old.Labels[policyhubv1.LabelDeclarationUID] == owner.UID {
			continue // unchanged but for churn: nothing to write
		}
		changes.Write = append(changes.Write, slice)
	}
	return changes
}

// sameState says whether two lists of clusters differ only in what moves with every agent's
// summary (policyhubv1.ClusterStatus.WithoutChurn): pass counts moving in a busy fleet rewrite no
// slice.
func sameState(a, b []policyhubv1.ClusterStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i].WithoutChurn(), b[i].WithoutChurn()) {
			return false
		}
	}
	return true
}

// indexOf is the index a slice's name ends with; -1 when it ends with none.
func indexOf(s *policyhubv1.ClusterStatusSlice) int {
	i := strings.LastIndexByte(s.Name, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(s.Name[i+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// entryBytes is a cluster's encoded size in a slice.
func entryBytes(c policyhubv1.ClusterStatus) int {
	b, err := json.Marshal(c)
	if err != nil {
		return MaxSliceBytes // cannot happen for these types; alone in its slice if it did
	}
	return len(b)
}
