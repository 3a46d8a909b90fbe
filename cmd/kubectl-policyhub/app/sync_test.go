package app

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

func syncTestObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kyverno.io/v1")
	u.SetKind("ClusterPolicy")
	u.SetName(name)
	return u
}

func TestSyncJobsGroupsByClusterAndPrunesWhereNoLongerPlaced(t *testing.T) {
	decls := []syncDeclaration{
		{source: "FleetPolicy/b", prune: true, leaving: []string{"c3"},
			objects: map[string][]*unstructured.Unstructured{"c1": {syncTestObject("b")}, "c2": {syncTestObject("b")}}},
		{source: "FleetPolicy/a", prune: false, leaving: []string{"c3"},
			objects: map[string][]*unstructured.Unstructured{"c2": {syncTestObject("a")}}},
	}
	clusters, jobs := syncJobs(decls, nil)
	if got := fmt.Sprint(clusters); got != "[c1 c2 c3]" {
		t.Fatalf("clusters %s", got)
	}
	describe := func(ds []work.Declaration) string {
		var parts []string
		for _, d := range ds {
			parts = append(parts, fmt.Sprintf("%s:%d:dry=%v:prune=%v", d.Source, len(d.Objects), d.DryRun, d.Prune))
		}
		return strings.Join(parts, " ")
	}
	want := map[string]string{
		"c1": "FleetPolicy/b:1:dry=true:prune=true",
		"c2": "FleetPolicy/a:1:dry=true:prune=false FleetPolicy/b:1:dry=true:prune=true",
		// b left c3 and prunes there; a (prune off) leaves its policy alone.
		"c3": "FleetPolicy/b:0:dry=true:prune=true",
	}
	for c, w := range want {
		if got := describe(jobs[c]); got != w {
			t.Errorf("%s: %s, want %s", c, got, w)
		}
	}

	clusters, jobs = syncJobs(decls, []string{"c2", "c9", "c2"})
	if got := fmt.Sprint(clusters); got != "[c2 c9]" {
		t.Errorf("filtered clusters %s", got)
	}
	if len(jobs) != 1 || len(jobs["c2"]) != 2 {
		t.Errorf("filtered jobs %v", jobs)
	}
}

func TestSyncDeclarationOfFollowsTheHub(t *testing.T) {
	var notes []string
	note := func(source, format string, args ...any) {
		notes = append(notes, source+": "+fmt.Sprintf(format, args...))
	}
	status := []policyhubv1.ClusterStatus{{Name: "c1"}}
	off := false
	placed := func() (*render.Targets, error) {
		return &render.Targets{Objects: map[string][]*unstructured.Unstructured{"c2": {syncTestObject("x")}}, Unknown: []string{"c9"}}, nil
	}
	invalid := func() (*render.Targets, error) {
		return nil, &render.InvalidError{Reason: "InvalidTemplate", Err: errors.New("no kind")}
	}

	broken := func() (*render.Targets, error) { return nil, errors.New("read application ns/shop: timeout") }

	if _, ok, err := syncDeclarationOf("FP/suspended", false, true, nil, status, note, placed); ok || err != nil {
		t.Errorf("a suspended declaration is planned (%v)", err)
	}
	if _, ok, err := syncDeclarationOf("FP/invalid", false, false, nil, status, note, invalid); ok || err != nil {
		t.Errorf("an invalid declaration is planned (%v)", err)
	}
	d, ok, err := syncDeclarationOf("FP/deleting", true, false, nil, status, note, placed)
	if !ok || err != nil || len(d.objects) != 0 || !d.prune || fmt.Sprint(d.leaving) != "[c1]" {
		t.Errorf("a deleting declaration: %+v %v %v, want a prune where it was", d, ok, err)
	}
	if _, ok, _ := syncDeclarationOf("FP/deleting-keep", true, false, &off, status, note, placed); ok {
		t.Error("a deleting declaration with prune off is planned")
	}
	d, ok, err = syncDeclarationOf("FP/placed", false, false, nil, status, note, placed)
	if !ok || err != nil || len(d.objects["c2"]) != 1 || !d.prune || fmt.Sprint(d.leaving) != "[c1]" {
		t.Errorf("a placed declaration: %+v %v %v, want it placed on c2 and leaving c1", d, ok, err)
	}
	if _, _, err := syncDeclarationOf("AP/ns/broken", false, false, nil, status, note, broken); err == nil || err.Error() != "AP/ns/broken: read application ns/shop: timeout" {
		t.Errorf("a declaration whose application cannot be read: %v", err)
	}
	want := []string{
		"FP/suspended: suspended",
		"FP/invalid: not dispatched by the hub (InvalidTemplate): no kind",
		"FP/deleting: being deleted",
		"FP/deleting-keep: being deleted with prune off",
		"FP/placed: its placement names clusters that are not in the inventory: c9",
	}
	if len(notes) != len(want) {
		t.Fatalf("notes %q", notes)
	}
	for i, w := range want {
		if !strings.HasPrefix(notes[i], w) {
			t.Errorf("note %d %q, want it to start with %q", i, notes[i], w)
		}
	}
}

func TestSyncKnownCluster(t *testing.T) {
	inv := placement.Inventory{Clusters: []placement.Cluster{{Name: "b"}, {Name: "a"}}}
	if err := knownCluster(inv, "a"); err != nil {
		t.Error(err)
	}
	err := knownCluster(inv, "x")
	if err == nil || err.Error() != "cluster x is not in the inventory (clusters: a, b)" {
		t.Errorf("unknown cluster: %v", err)
	}
	if err := knownCluster(placement.Inventory{}, "x"); err == nil || !strings.Contains(err.Error(), "(clusters: none)") {
		t.Errorf("empty inventory: %v", err)
	}
}

func TestSyncOutcome(t *testing.T) {
	ok := &syncReport{Clusters: []syncClusterReport{{Name: "a"}}}
	if err := syncOutcome(ok); err != nil {
		t.Errorf("clean plan: %v", err)
	}
	refused := &syncReport{Clusters: []syncClusterReport{{Name: "a"}}, Totals: syncActions{Failed: 1}}
	if err := syncOutcome(refused); !errors.Is(err, errFindings) {
		t.Errorf("refused object: %v, want errFindings", err)
	}
	unreachable := &syncReport{Clusters: []syncClusterReport{{Name: "a"}, {Name: "b", Error: "down"}}, Totals: syncActions{Failed: 1}}
	err := syncOutcome(unreachable)
	if err == nil || errors.Is(err, errFindings) || !strings.Contains(err.Error(), "1 of 2 clusters could not be planned (b)") {
		t.Errorf("unreachable cluster: %v", err)
	}
}

func TestSyncClusterFromAndTable(t *testing.T) {
	res := &work.ClusterResult{Cluster: "c1", Declarations: []*work.DeclarationResult{
		{Source: "FleetPolicy/new", Phase: policyhubv1.ClusterPhaseDryRun, Actions: policyhubv1.ActionCounts{Created: 1},
			Plan: []policyhubv1.PlannedChange{{Action: "Create", APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "new", Diff: "--- live (absent)\n+++ after sync\n@@ -1,2 +1,3 @@\n a: 1\n \n+kind: ClusterPolicy\n"}}},
		{Source: "FleetPolicy/bad", Phase: policyhubv1.ClusterPhaseFailed, Message: "refused", Actions: policyhubv1.ActionCounts{Failed: 1},
			Plan: []policyhubv1.PlannedChange{{Action: "Failed", APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "bad", Message: "admission webhook denied the request:\n\nno wildcards \n"}}},
		{Source: "FleetPolicy/old", Phase: policyhubv1.ClusterPhaseUnsupported, Message: "cluster c1 does not serve x"},
	}}
	c := syncClusterFrom(res)
	report := &syncReport{Clusters: []syncClusterReport{c, {Name: "c2", Error: "cluster c2: unreachable: EOF",
		Declarations: []syncDeclarationReport{{Declaration: "FleetPolicy/new", Phase: "Failed", Message: "cluster c2: unreachable: EOF"}}}},
		Notes: []syncNote{{Declaration: "FleetPolicy/off", Message: "suspended"}}}
	for _, cl := range report.Clusters {
		for _, d := range cl.Declarations {
			report.Totals.add(d.Actions)
		}
	}
	var out bytes.Buffer
	syncWriteTable(&out, report)
	want := `CLUSTER c1
  DECLARATION      PHASE        CREATED  UPDATED  UNCHANGED  DELETED  CONFLICT  FAILED
  FleetPolicy/new  DryRun       1        0        0          0        0         0
  FleetPolicy/bad  Failed       0        0        0          0        0         1
  FleetPolicy/old  Unsupported  0        0        0          0        0         0
  FleetPolicy/new: Create kyverno.io/v1 ClusterPolicy new
      --- live (absent)
      +++ after sync
      @@ -1,2 +1,3 @@
       a: 1

      +kind: ClusterPolicy
  FleetPolicy/bad: Failed kyverno.io/v1 ClusterPolicy bad
      admission webhook denied the request:
      no wildcards
  FleetPolicy/old: Unsupported: cluster c1 does not serve x

CLUSTER c2 — not planned: cluster c2: unreachable: EOF
  DECLARATION      PHASE   CREATED  UPDATED  UNCHANGED  DELETED  CONFLICT  FAILED
  FleetPolicy/new  Failed  0        0        0          0        0         0

note: FleetPolicy/off: suspended

2 clusters (1 could not be planned): would create 1, update 0, delete 0; 0 unchanged, 0 conflicts, 1 refused. Dry-run: nothing was written.
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if err := writeReport(&out, "json", report, nil); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"clusters"`, `"declaration": "FleetPolicy/new"`, `"phase": "DryRun"`, `"created": 1`, `"changes"`, `"diff"`, `"error": "cluster c2: unreachable: EOF"`, `"notes"`, `"totals"`} {
		if !strings.Contains(out.String(), field) {
			t.Errorf("json lacks %s:\n%s", field, out.String())
		}
	}
	out.Reset()
	if err := writeReport(&out, "yaml", report, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "declaration: FleetPolicy/new") {
		t.Errorf("yaml:\n%s", out.String())
	}
}

func TestSyncPlanProgressGoesToStderrForManyClusters(t *testing.T) {
	syncer, err := work.NewSyncer(work.Options{HubID: "h", Lock: work.LockOptions{Identity: "kubectl-policyhub/test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer syncer.Close()
	// Clusters without declarations are reported without a request.
	var progress bytes.Buffer
	r := syncPlan(t.Context(), syncer, &rest.Config{Host: "https://127.0.0.1:1"}, []string{"a", "b", "c", "d"}, nil, &progress)
	if len(r.Clusters) != 4 || r.Clusters[3].Name != "d" || r.Clusters[3].Declarations == nil {
		t.Errorf("clusters %+v", r.Clusters)
	}
	if got := strings.Count(progress.String(), "\n"); got != 4 || !strings.Contains(progress.String(), "planned 4/4 clusters\n") {
		t.Errorf("progress %q, want a line per cluster", progress.String())
	}
	progress.Reset()
	syncPlan(t.Context(), syncer, &rest.Config{Host: "https://127.0.0.1:1"}, []string{"a", "b", "c"}, nil, &progress)
	if progress.Len() != 0 {
		t.Errorf("progress for 3 clusters: %q", progress.String())
	}
}

func TestSyncWithoutDryRunIsAUsageError(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(t.Context(), []string{"sync"}, Streams{Out: &out, ErrOut: &errOut})
	if code != ExitError || !strings.Contains(errOut.String(), "the hub syncs; run `sync --dry-run` to preview") || out.Len() != 0 {
		t.Errorf("exit %d, stderr %q, stdout %q", code, errOut.String(), out.String())
	}
	if strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("not one line: %q", errOut.String())
	}
}
