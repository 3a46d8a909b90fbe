package statusslice

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var owner = Owner{Kind: policyhubv1.KindFleetPolicy, Name: "fp", UID: "uid-1", Namespace: "hub"}

func clusters(n int, phase policyhubv1.ClusterPhase) []policyhubv1.ClusterStatus {
	var out []policyhubv1.ClusterStatus
	for i := range n {
		out = append(out, policyhubv1.ClusterStatus{Name: fmt.Sprintf("c-%03d", i), Phase: phase})
	}
	return out
}

// stored is what the apiserver holds after changes: each written slice with a resourceVersion.
func stored(have []policyhubv1.ClusterStatusSlice, c Changes) []policyhubv1.ClusterStatusSlice {
	byName := map[string]policyhubv1.ClusterStatusSlice{}
	for _, s := range have {
		byName[s.Name] = s
	}
	for _, s := range c.Delete {
		delete(byName, s.Name)
	}
	for _, s := range c.Write {
		s.ResourceVersion = "1"
		byName[s.Name] = s
	}
	var out []policyhubv1.ClusterStatusSlice
	for _, s := range byName {
		out = append(out, s)
	}
	return out
}

func names(slices []policyhubv1.ClusterStatusSlice) string {
	var out []string
	for _, s := range slices {
		out = append(out, fmt.Sprintf("%s(%d)", s.Name, len(s.Clusters)))
	}
	return strings.Join(out, " ")
}

// A change rewrites only the slices it touches: unchanged clusters write nothing, one cluster's
// change writes its slice, a joining cluster fills the slice with room, a leaving one rewrites its
// own slice, and a slice left empty is deleted.
func TestSplitWritesOnlyWhatChanged(t *testing.T) {
	all := clusters(25, policyhubv1.ClusterPhaseSynced)
	first := Split(owner, all, nil, 10)
	if len(first.Write) != 3 || len(first.Delete) != 0 {
		t.Fatalf("first split: write %s, delete %s; want 3 slices of 10, 10, 5", names(first.Write), names(first.Delete))
	}
	for i, s := range first.Write {
		if s.Name != policyhubv1.ClusterStatusSliceName(owner.Kind, owner.UID, i) || s.Namespace != "hub" ||
			s.Labels[policyhubv1.LabelDeclarationUID] != "uid-1" || s.Declaration.Name != "fp" {
			t.Errorf("slice %d: %s/%s labels %v declaration %+v", i, s.Namespace, s.Name, s.Labels, s.Declaration)
		}
	}
	have := stored(nil, first)
	if got := policyhubv1.JoinClusterStatusSlices(have); len(got) != 25 {
		t.Fatalf("joined %d clusters, want 25", len(got))
	}

	if c := Split(owner, all, have, 10); len(c.Write)+len(c.Delete) != 0 {
		t.Errorf("nothing changed, yet write %s, delete %s", names(c.Write), names(c.Delete))
	}

	changed := append([]policyhubv1.ClusterStatus(nil), all...)
	changed[12].Phase = policyhubv1.ClusterPhaseFailed
	if c := Split(owner, changed, have, 10); len(c.Write) != 1 || len(c.Delete) != 0 || c.Write[0].Name != have[0].Name[:len(have[0].Name)-1]+"1" {
		t.Errorf("one cluster changed: write %s, delete %s; want slice 1 alone", names(c.Write), names(c.Delete))
	}

	joined := append(append([]policyhubv1.ClusterStatus(nil), all...), policyhubv1.ClusterStatus{Name: "a-first", Phase: policyhubv1.ClusterPhasePending})
	c := Split(owner, joined, have, 10)
	if len(c.Write) != 1 || len(c.Write[0].Clusters) != 6 {
		t.Errorf("a cluster joined (first by name): write %s; want only the slice with room, now of 6", names(c.Write))
	}

	left := all[10:] // the first slice's clusters all left
	c = Split(owner, left, have, 10)
	if len(c.Write) != 0 || len(c.Delete) != 1 || !strings.HasSuffix(c.Delete[0].Name, "-0") {
		t.Errorf("a slice's clusters left: write %s, delete %s; want slice 0 deleted and nothing written", names(c.Write), names(c.Delete))
	}

	if c := Split(owner, nil, have, 10); len(c.Delete) != 3 {
		t.Errorf("no clusters: delete %s, want every slice", names(c.Delete))
	}
}

// A slice fills by bytes before it fills by count: clusters with large dry-run plans spread over
// more slices, each under MaxSliceBytes, so none is refused by etcd's request limit.
func TestSplitBoundsBytes(t *testing.T) {
	big := clusters(100, policyhubv1.ClusterPhaseDryRun)
	diff := strings.Repeat("x", 4000)
	for i := range big {
		for range 20 {
			big[i].Plan = append(big[i].Plan, policyhubv1.PlannedChange{Action: "Update", APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "p", Diff: diff})
		}
	}
	c := Split(owner, big, nil, 0)
	total := 0
	for _, s := range c.Write {
		size := 0
		for _, cl := range s.Clusters {
			size += entryBytes(cl)
		}
		if size > MaxSliceBytes {
			t.Errorf("slice %s holds %d bytes of clusters, over %d", s.Name, size, MaxSliceBytes)
		}
		total += len(s.Clusters)
	}
	if total != 100 || len(c.Write) < 2 {
		t.Errorf("%d clusters in %d slices; want all 100, in more than one slice", total, len(c.Write))
	}
}

// A slice named otherwise than the declaration's own scheme (another declaration's uid, or no
// index) is not kept: it is deleted and its clusters written where they belong.
func TestSplitReplacesForeignNames(t *testing.T) {
	foreign := policyhubv1.ClusterStatusSlice{Clusters: clusters(2, policyhubv1.ClusterPhaseSynced)}
	foreign.Name, foreign.Namespace, foreign.ResourceVersion = "fleetpolicy-other-0", "hub", "7"
	c := Split(owner, clusters(2, policyhubv1.ClusterPhaseSynced), []policyhubv1.ClusterStatusSlice{foreign}, 0)
	if len(c.Delete) != 1 || len(c.Write) != 1 || c.Write[0].ResourceVersion != "" || c.Write[0].Name != policyhubv1.ClusterStatusSliceName(owner.Kind, owner.UID, 0) {
		t.Errorf("write %s, delete %s; want the foreign slice deleted and slice 0 created", names(c.Write), names(c.Delete))
	}
}

// In a busy fleet every summary moves pass counts: those alone (and the report time) rewrite no
// slice; a fail count, a phase or staleness does, and then the slice takes the latest of all.
func TestSplitIgnoresChurn(t *testing.T) {
	at := func(pass, fail int64, sec int) []policyhubv1.ClusterStatus {
		cs := clusters(3, policyhubv1.ClusterPhaseSynced)
		ts := metav1.NewTime(time.Unix(int64(sec), 0))
		cs[1].Results, cs[1].ReportTime = &policyhubv1.ResultCounts{Pass: pass, Fail: fail, Skip: pass}, &ts
		return cs
	}
	have := stored(nil, Split(owner, at(10, 1, 1), nil, 0))
	if c := Split(owner, at(11, 1, 2), have, 0); len(c.Write) != 0 {
		t.Errorf("pass, skip and report time moved: wrote %s, want nothing", names(c.Write))
	}
	c := Split(owner, at(12, 2, 3), have, 0)
	if len(c.Write) != 1 || c.Write[0].Clusters[1].Results.Pass != 12 || !c.Write[0].Clusters[1].ReportTime.Equal(ptrTime(3)) {
		t.Errorf("a fail count moved: wrote %s, want the slice with the latest pass count and report time", names(c.Write))
	}
	stale := at(10, 1, 1)
	stale[2].Stale = true
	if c := Split(owner, stale, have, 0); len(c.Write) != 1 {
		t.Errorf("a cluster turned stale: wrote %s, want its slice", names(c.Write))
	}
}

func ptrTime(sec int) *metav1.Time {
	ts := metav1.NewTime(time.Unix(int64(sec), 0))
	return &ts
}
