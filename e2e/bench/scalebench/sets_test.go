package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/bench/benchkit"
	"github.com/policyhub/policyhub/hub/source"
)

func TestMaxSetMembersIsTheHubsSourceLimit(t *testing.T) {
	if maxSetMembers != source.DefaultLimits.MaxPolicies {
		t.Errorf("maxSetMembers %d, the hub's source limit %d", maxSetMembers, source.DefaultLimits.MaxPolicies)
	}
}

// The library is read as the hub reads it: every member, and a new version that changes one.
func TestSetLibraryAsTheHubReadsIt(t *testing.T) {
	const n = 100
	lib, err := newSetLibrary("policyhub-system", n)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lib.Labels[policyhubv1.LabelPolicyLibrary]; !ok {
		t.Errorf("library labels %v: no %s", lib.Labels, policyhubv1.LabelPolicyLibrary)
	}
	first, err := source.ConfigMaps([]corev1.ConfigMap{*lib}, source.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Policies) != n {
		t.Fatalf("%d members, want %d", len(first.Policies), n)
	}
	for _, p := range first.Policies {
		if p.GetKind() != "ClusterPolicy" || !strings.HasPrefix(p.GetName(), "sets-member-") {
			t.Errorf("member %s %s", p.GetKind(), p.GetName())
		}
		if strings.HasPrefix(p.GetName(), setsFPPrefix) {
			t.Errorf("member %s is named as the FleetPolicies' policies", p.GetName())
		}
	}

	changed := lib.DeepCopy()
	data, err := setMemberYAML(n/2, 1)
	if err != nil {
		t.Fatal(err)
	}
	changed.Data[setMemberKey(n/2)] = data
	second, err := source.ConfigMaps([]corev1.ConfigMap{*changed}, source.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if second.Digest == first.Digest {
		t.Errorf("a changed member left the digest %s", first.Digest)
	}
	added, changedRefs, removed, _ := source.Changes(first.Policies, second.Policies)
	if len(added) != 0 || len(removed) != 0 || len(changedRefs) != 1 || changedRefs[0].Name != setMemberName(n/2) {
		t.Errorf("changes: added %v, changed %v, removed %v; want %s changed alone", added, changedRefs, removed, setMemberName(n/2))
	}
}

func TestPolicySetPlacedAsTheFleetPolicies(t *testing.T) {
	ps := newPolicySet()
	// The sets scenario's FleetPolicies, as converge creates them.
	fp, err := benchkit.FleetPolicy(setsFPPrefix+"-0", 0, map[string]string{setLabel: "virtual"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ps.Spec.Placement, fp.Spec.Placement) {
		t.Errorf("set placement %+v, FleetPolicies' %+v", ps.Spec.Placement, fp.Spec.Placement)
	}
	src := ps.Spec.Source
	if src.ConfigMaps == nil || src.Inline != nil || src.OCI != nil || src.FluxSource != nil {
		t.Fatalf("source %+v: want configMaps alone", src)
	}
	if got := src.ConfigMaps.Selector.MatchLabels[policyhubv1.LabelPolicyLibrary]; got != setLibraryLabel {
		t.Errorf("selector %v", src.ConfigMaps.Selector)
	}
}

func TestOpsBetween(t *testing.T) {
	before := map[string]map[string]float64{
		"vc-0000": {"created": 100},
		"vc-0001": {"created": 100},
		"vc-0002": {"created": 100},
	}
	after := map[string]map[string]float64{
		"vc-0000": {"created": 100, "updated": 1, "unchanged": 99},
		"vc-0001": {"created": 100, "unchanged": 100}, // its apiserver already had the new member
		"vc-0002": {"created": 100, "updated": 3, "unchanged": 97},
		"vc-0003": {"created": 1}, // no series before: counted from 0
	}
	d := opsBetween(before, after)
	if d.writes() != 5 || d.byAction["unchanged"] != 296 {
		t.Errorf("writes %v, by action %v", d.writes(), d.byAction)
	}
	if d.clusters != 4 || d.oneUpdate != 1 || d.maxWrites != 3 || d.maxCluster != "vc-0002" {
		t.Errorf("clusters %d, one update %d, max %v in %s", d.clusters, d.oneUpdate, d.maxWrites, d.maxCluster)
	}
}

func TestSetTrackerWaitsForTheNewVersionEverywhere(t *testing.T) {
	clusters := []string{"vc-0000", "vc-0001"}
	tr := &setTracker{name: setName, clusters: 2, slices: map[string]*policyhubv1.ClusterStatusSlice{},
		revisions: map[string]map[string]time.Time{}, ready: map[string]time.Time{}}
	set := func(digest string, ready bool, synced int32) *policyhubv1.PolicySet {
		ps := &policyhubv1.PolicySet{ObjectMeta: metav1.ObjectMeta{Name: setName, Generation: 1}}
		ps.Status.ObservedGeneration = 1
		ps.Status.Source = &policyhubv1.SourceStatus{Digest: digest}
		ps.Status.Summary = policyhubv1.StatusSummary{Clusters: 2, Synced: synced}
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		ps.Status.Conditions = []metav1.Condition{{Type: policyhubv1.ConditionReady, Status: status}}
		return ps
	}
	slice := func(revisions ...string) *policyhubv1.ClusterStatusSlice {
		s := &policyhubv1.ClusterStatusSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "policyset-uid-0"},
			Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindPolicySet, Name: setName}}
		for i, r := range revisions {
			s.Clusters = append(s.Clusters, policyhubv1.ClusterStatus{Name: clusters[i], Phase: policyhubv1.ClusterPhaseSynced, Revision: r})
		}
		return s
	}
	tr.observe(set("sha256:a", true, 2))
	tr.observe(slice("sha256:a", "sha256:a"))
	if w := tr.check(clusters, ""); !w.ok || w.digest != "sha256:a" {
		t.Fatalf("first version: %+v", w)
	}
	// The new version named while the set is still Ready from the old one: not converged until
	// every cluster runs it.
	tr.observe(set("sha256:b", true, 2))
	tr.observe(slice("sha256:b", "sha256:a"))
	if w := tr.check(clusters, "sha256:a"); w.ok || w.missing != 1 || w.digest != "sha256:b" {
		t.Errorf("one cluster at the new version: %+v", w)
	}
	tr.observe(slice("sha256:b", "sha256:b"))
	if w := tr.check(clusters, "sha256:a"); !w.ok || w.at.Before(w.readyAt) || w.at.Before(w.clustersAt) {
		t.Errorf("every cluster at the new version: %+v", w)
	}
	// Another declaration's slices are not the set's.
	other := slice("sha256:c", "sha256:c")
	other.Declaration.Kind = policyhubv1.KindFleetPolicy
	tr.observe(other)
	if _, ok := tr.revisions["sha256:c"]; ok {
		t.Errorf("a FleetPolicy's slice was counted")
	}
}
