package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestParseDeclarationRef(t *testing.T) {
	for arg, want := range map[string]declarationRef{
		"team":                               {kindFleetPolicy, "team"},
		"fp/team":                            {kindFleetPolicy, "team"},
		"FleetPolicy/team":                   {kindFleetPolicy, "team"},
		"fleetpolicies.policyhub.io/team":    {kindFleetPolicy, "team"},
		"ap/shop":                            {kindApplicationPolicy, "shop"},
		"applicationpolicy/shop":             {kindApplicationPolicy, "shop"},
		"applicationpolicies.policyhub.io/x": {kindApplicationPolicy, "x"},
		"pset/pss":                           {kindPolicySet, "pss"},
		"PolicySet/pss":                      {kindPolicySet, "pss"},
		"policysets.policyhub.io/pss":        {kindPolicySet, "pss"},
	} {
		got, err := parseDeclarationRef(arg)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", arg, got, err, want)
		}
	}
	for _, arg := range []string{"deploy/web", "fp/", "ap/a/b", ""} {
		_, err := parseDeclarationRef(arg)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", arg, err)
		}
	}
}

func TestActionTallyString(t *testing.T) {
	if got := (actionTally{}).String(); got != "-" {
		t.Errorf("zero: %q", got)
	}
	if got := (actionTally{Created: 1, Unchanged: 2, Failed: 1}).String(); got != "created=1,unchanged=2,failed=1" {
		t.Errorf("%q", got)
	}
}

// A cluster whose Kyverno writes no pass results shows pass null, and so does the total.
func TestDeclarationStatusPassUnknown(t *testing.T) {
	d := declarationStatus{Kind: kindFleetPolicy, Name: "team"}
	d.fill(nil, []policyhubv1.ClusterStatus{
		{Name: "fail-only", Phase: policyhubv1.ClusterPhaseSynced, Results: &policyhubv1.ResultCounts{Fail: 2}},
		{Name: "every-result", Phase: policyhubv1.ClusterPhaseSynced, Results: &policyhubv1.ResultCounts{Pass: 5, Fail: 1}},
	}, clusterFacts{"fail-only": {Kyverno: &policyhubv1.KyvernoFacts{ReportedResults: []string{"fail"}}}})
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"results":{"pass":null,"fail":3,`, `"name":"fail-only","phase":"Synced"`, `"results":{"pass":5,"fail":1,`} {
		if !strings.Contains(string(data), part) {
			t.Errorf("status JSON lacks %s: %s", part, data)
		}
	}
	if !strings.Contains(string(data), `"name":"fail-only"`) || strings.Count(string(data), `"pass":null`) != 2 {
		t.Errorf("want pass null for fail-only and the total only: %s", data)
	}
}

// Totals add up the clusters' results; a cluster without a summary has none (null, "-").
func TestDeclarationStatusFill(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	reportedAt := now.Add(-4 * time.Minute)
	d := declarationStatus{Kind: kindFleetPolicy, Name: "team"}
	d.fill([]metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Failed", Message: "not synced in cluster-2: Failed"}},
		[]policyhubv1.ClusterStatus{
			{Name: "cluster-2", Phase: policyhubv1.ClusterPhaseFailed, Message: "unreachable"},
			{Name: "cluster-1", Phase: policyhubv1.ClusterPhaseSynced, Actions: policyhubv1.ActionCounts{Unchanged: 1},
				Results: &policyhubv1.ResultCounts{Pass: 3, Fail: 2, Error: 1}, Blocked: 4, Stale: true, ReportTime: &metav1.Time{Time: reportedAt}},
		}, nil)
	if d.Ready != "False" || d.Reason != "Failed" || d.Violations != 3 || d.Blocked != 4 || d.Results.Pass != 3 {
		t.Errorf("%+v", d)
	}
	if len(d.Clusters) != 2 || d.Clusters[0].Name != "cluster-1" || d.Clusters[1].Results != nil || d.Clusters[0].Violations != 3 {
		t.Fatalf("clusters %+v", d.Clusters)
	}
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printStatusTable(tw, &statusReport{Declarations: []declarationStatus{d,
		{Kind: kindApplicationPolicy, Namespace: "shop", Name: "limits", Ready: "True", Reason: "NoClusters", Message: "the placement selects no cluster", UpToDate: true, Engines: []string{"Kyverno"}}}}, now)
	_ = tw.Flush()
	want := []string{
		"DECLARATION                     CLUSTER     ENGINE    PHASE        ACTIONS       FAIL   ERROR   BLOCKED   REPORTED   MESSAGE",
		"FleetPolicy/team                cluster-1   -         Synced       unchanged=1   2      1       4         4m         results are stale (the agent missed three heartbeats)",
		"FleetPolicy/team                cluster-2   -         Failed       -             -      -       0         -          unreachable",
		"ApplicationPolicy/shop/limits   <none>      Kyverno   NoClusters   -             -      -       -         -          the placement selects no cluster",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A PolicySet whose source cannot be read says so, and which version its clusters keep, in a row
// of its own (not "Synced" and "-" alone); a declaration not Ready for a reason of its own (a
// rollout waiting) says it in an <all> row; one whose clusters' rows say why needs neither.
func TestStatusTableSaysWhatNoClusterRowSays(t *testing.T) {
	synced := []policyhubv1.ClusterStatus{{Name: "cluster-1", Phase: policyhubv1.ClusterPhaseSynced, Revision: "sha256:aaa"}}
	set := declarationStatus{Kind: kindPolicySet, Name: "lib", UpToDate: true}
	set.fill([]metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: policyhubv1.ReasonSourceNotReady,
		Message: "the source cannot be read: dial tcp: refused; the clusters keep version sha256:aaa (reg/lib:stable)"}}, synced, nil)
	set.Source = &sourceState{Ready: "False", Reason: "ReadFailed", Message: "dial tcp: refused; the clusters keep version sha256:aaa (reg/lib:stable)"}
	failing := declarationStatus{Kind: kindPolicySet, Name: "lib2", UpToDate: true,
		Source: &sourceState{Ready: "False", Reason: "ReadFailed", Message: "dial tcp: refused; the clusters keep version sha256:bbb"}}
	failing.fill([]metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Failed", Message: "not synced in cluster-1: Failed"}},
		[]policyhubv1.ClusterStatus{{Name: "cluster-1", Phase: policyhubv1.ClusterPhaseFailed, Message: "unreachable"}}, nil)
	waiting := declarationStatus{Kind: kindFleetPolicy, Name: "team", UpToDate: true}
	waiting.fill([]metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "WaitingForApproval", Message: "wave canary waits for approval"}}, synced, nil)
	fine := declarationStatus{Kind: kindFleetPolicy, Name: "fine", UpToDate: true}
	fine.fill([]metav1.Condition{{Type: policyhubv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Synced", Message: "synced in 1 clusters"}}, synced, nil)
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printStatusTable(tw, &statusReport{Declarations: []declarationStatus{set, failing, waiting, fine}}, time.Now())
	_ = tw.Flush()
	got := out.String()
	for _, want := range []string{
		"PolicySet/lib      <all>       -        SourceNotReady       -         -      -       -         -          the source cannot be read: dial tcp: refused; the clusters keep version sha256:aaa (reg/lib:stable)",
		"PolicySet/lib2     <source>    -        ReadFailed           -         -      -       -         -          dial tcp: refused; the clusters keep version sha256:bbb",
		"PolicySet/lib2     cluster-1   -        Failed ",
		"FleetPolicy/team   <all>       -        WaitingForApproval   -         -      -       -         -          wave canary waits for approval",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PolicySet/lib      <source>") || strings.Contains(got, "PolicySet/lib2     <all>") || strings.Contains(got, "FleetPolicy/fine   <") {
		t.Errorf("a row says again what another says:\n%s", got)
	}
}

// A mixed fleet: a Gatekeeper declaration's pass results are unknown everywhere (its audit counts
// violations only); a cluster whose agent says it does not run the declaration's engine says so
// in its row; the ENGINE column names the declaration's engines.
func TestStatusOfEachEngine(t *testing.T) {
	facts := clusterFacts{
		"gk":      {Engines: []policyhubv1.PolicyEngine{policyhubv1.EngineKubernetes, policyhubv1.EngineGatekeeper}},
		"kyverno": {Engines: []policyhubv1.PolicyEngine{policyhubv1.EngineKyverno, policyhubv1.EngineKubernetes}},
	}
	gk := declarationStatus{Kind: kindFleetPolicy, Name: "must-have-team", Engines: templateEngines("constraints.gatekeeper.sh/v1beta1")}
	gk.fill(nil, []policyhubv1.ClusterStatus{
		{Name: "gk", Phase: policyhubv1.ClusterPhaseSynced, Results: &policyhubv1.ResultCounts{Fail: 4}},
		{Name: "kyverno", Phase: policyhubv1.ClusterPhaseUnsupported, Message: "cluster kyverno does not serve constraints.gatekeeper.sh/v1beta1 K8sRequiredLabels"},
	}, facts)
	vap := declarationStatus{Kind: kindFleetPolicy, Name: "vap-team", Engines: templateEngines("admissionregistration.k8s.io/v1")}
	vap.fill(nil, []policyhubv1.ClusterStatus{{Name: "kyverno", Phase: policyhubv1.ClusterPhaseSynced, Results: &policyhubv1.ResultCounts{Pass: 3, Fail: 1}}}, facts)
	if j := marshal(t, gk.Results); j != `{"pass":null,"fail":4,"warn":null,"error":null,"skip":null}` || marshal(t, gk.Clusters[0].Results) != j {
		t.Errorf("Gatekeeper results %s (cluster gk %s): only fail is known", j, marshal(t, gk.Clusters[0].Results))
	}
	if j := marshal(t, vap.Results); j != `{"pass":3,"fail":1,"warn":0,"error":0,"skip":0}` {
		t.Errorf("Kubernetes admission policy results %s: every kind is known", j)
	}
	if !slices.Equal(gk.Clusters[0].Engines, []string{"Kubernetes", "Gatekeeper"}) {
		t.Errorf("cluster gk's engines %v", gk.Clusters[0].Engines)
	}
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printStatusTable(tw, &statusReport{Declarations: []declarationStatus{gk, vap}}, time.Now())
	_ = tw.Flush()
	for _, want := range []string{
		"FleetPolicy/must-have-team   gk        Gatekeeper   Synced ",
		"FleetPolicy/must-have-team   kyverno   Gatekeeper   Unsupported   -         -      -       0         -          the cluster runs Kyverno,Kubernetes, not Gatekeeper; cluster kyverno does not serve",
		"FleetPolicy/vap-team         kyverno   Kubernetes   Synced ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
