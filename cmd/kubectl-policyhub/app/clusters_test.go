package app

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestServedKyvernoAPIs(t *testing.T) {
	groups := metav1.APIGroupList{Groups: []metav1.APIGroup{
		{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1"}}},
		{Name: "policies.kyverno.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "policies.kyverno.io/v1alpha1"}, {GroupVersion: "policies.kyverno.io/v1"}}},
	}}
	if got := servedKyvernoAPIs(groups); !slices.Equal(got, []string{"policies.kyverno.io/v1"}) {
		t.Errorf("%v", got)
	}
	if got := servedKyvernoAPIs(metav1.APIGroupList{}); got == nil || len(got) != 0 {
		t.Errorf("no Kyverno: %#v, want [] (not null: the cluster was asked)", got)
	}
}

func TestClustersTable(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	// Ages by the hub's clock: the clusters' clocks (generatedAt) are off by an hour.
	fresh := seenAt(now.Add(-42*time.Second), policyhubv1.PolicyReportSummarySpec{GeneratedAt: &metav1.Time{Time: now.Add(time.Hour)},
		Totals: policyhubv1.ResultCounts{Pass: 5, Fail: 2, Error: 1}, Blocked: 3,
		Engine: policyhubv1.EngineInfo{PolicyAPIs: []string{"policies.kyverno.io/v1", "kyverno.io/v1"},
			Engines: []policyhubv1.PolicyEngine{policyhubv1.EngineKyverno, policyhubv1.EngineKubernetes},
			Kyverno: &policyhubv1.KyvernoFacts{Version: "v1.19.1", PolicyExceptions: ptrTo(true), ExceptionNamespace: "kyverno-exceptions"},
			Legacy: &policyhubv1.LegacyInventory{Counts: []policyhubv1.LegacyCount{
				{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: 4}, {Kind: "PolicyException", Owner: policyhubv1.LegacyOwnerPolicyhub, Count: 1}}}}})
	// A fail-only Kyverno 1.20 (--allowedResults=fail): pass is unknown, never 0.
	old := seenAt(now.Add(-10*time.Minute), policyhubv1.PolicyReportSummarySpec{GeneratedAt: &metav1.Time{Time: now.Add(-time.Hour)},
		Engine: policyhubv1.EngineInfo{Kyverno: &policyhubv1.KyvernoFacts{Version: "v1.20.0", PolicyExceptions: ptrTo(false), ReportedResults: []string{"fail"}},
			Engines:    []policyhubv1.PolicyEngine{policyhubv1.EngineKyverno, policyhubv1.EngineGatekeeper},
			Gatekeeper: &policyhubv1.GatekeeperFacts{Version: "v3.23.1", Webhook: true},
			Legacy:     &policyhubv1.LegacyInventory{}}})
	fresh.Status.Pacing = &policyhubv1.SummaryPacing{PushInterval: metav1.Duration{Duration: 10 * time.Second}, HeartbeatInterval: metav1.Duration{Duration: time.Minute}, Clusters: 3}
	report := &clustersReport{Clusters: []clusterReport{
		{Name: "cluster-1", Labels: map[string]string{"env": "prod", "region": "eu"}, Reachable: true, Version: "v1.35.0",
			KyvernoAPIs: []string{"kyverno.io/v1", "policies.kyverno.io/v1"}, Summary: toClusterSummary(fresh, liveness{}, now)},
		{Name: "cluster-2", Labels: map[string]string{}, Reachable: true, Version: "v1.30.0", KyvernoAPIs: []string{}, Summary: toClusterSummary(old, liveness{}, now)},
		{Name: "cluster-3", Labels: map[string]string{}, Error: "connection refused"},
	}}
	if s := report.Clusters[0].Summary; s.Violations != 3 || s.AgeSeconds != 42 || s.Stale || s.ReportAPIs == nil {
		t.Errorf("fresh summary %+v", s)
	}
	if !report.Clusters[1].Summary.Stale {
		t.Error("a summary 10m old (heartbeat 1m) is not stale")
	}
	if s := report.Clusters[0].Summary; s.LegacyObjects == nil || *s.LegacyObjects != 5 || s.Kyverno.EnforcesLegacy != "yes" ||
		!slices.Equal(s.PolicyAPIs, []string{"kyverno.io/v1", "policies.kyverno.io/v1"}) {
		t.Errorf("engine facts: %+v %+v", s, s.Kyverno)
	}
	data, err := json.Marshal(report.Clusters[1].Summary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"results":{"pass":null,"fail":0,"warn":null,"error":null,"skip":null}`) ||
		!strings.Contains(string(data), `"enforcesLegacy":"no"`) || !strings.Contains(string(data), `"legacyObjects":0`) {
		t.Errorf("a fail-only cluster's JSON: %s", data)
	}
	if data, _ := json.Marshal(report.Clusters[0].Summary); !strings.Contains(string(data), `"pacing":{"pushInterval":"10s","heartbeatInterval":"1m0s"}`) {
		t.Errorf("a paced cluster's JSON: %s", data)
	}
	if !strings.Contains(string(data), `"pacing":null`) {
		t.Errorf("an unpaced cluster's JSON: %s", data)
	}
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printClustersTable(tw, report)
	_ = tw.Flush()
	want := `CLUSTER     REACHABLE   VERSION   ENGINES                       KYVERNO                                KYVERNO-VERSION   LEGACY-ENFORCED   EXCEPTIONS                  LEGACY      SUMMARY-AGE   PACING   FAIL   ERROR   BLOCKED   LABELS
cluster-1   yes         v1.35.0   Kyverno,Kubernetes            kyverno.io/v1,policies.kyverno.io/v1   v1.19.1           yes               on(ns=kyverno-exceptions)   5           42s           10s/1m   2      1       3         env=prod,region=eu
cluster-2   yes         v1.30.0   Kyverno,Gatekeeper(v3.23.1)   <none>                                 v1.20.0           no                off                         0           10m (stale)   <none>   0      -       0         <none>
cluster-3   no          -         <unknown>                     <unknown>                              <unknown>         unknown           <unknown>                   <unknown>   <none>        -        -      -       -         <none>
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}
}

// Every command documents itself with examples, and a bad -o is refused before any request.
func TestHelpAndBadOutput(t *testing.T) {
	for _, cmd := range []string{"clusters", "status", "info", "inventory"} {
		var out, errOut bytes.Buffer
		code := Run(t.Context(), []string{cmd, "--help"}, Streams{Out: &out, ErrOut: &errOut})
		if code != ExitOK || !strings.Contains(out.String(), "Examples:\n  # ") || !strings.Contains(out.String(), "-o json|yaml prints {") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, out.String())
		}
		out.Reset()
		code = Run(t.Context(), []string{"--kubeconfig", "/nonexistent", cmd, "x", "-o", "xml"}, Streams{Out: &out, ErrOut: &errOut})
		if code != ExitError || out.Len() != 0 {
			t.Errorf("%s -o xml: exit %d, stdout %q", cmd, code, out.String())
		}
	}
}

// When the hub's replicas share the fleet, a REPLICA column names each cluster's; without, none.
func TestClustersTableNamesTheReplica(t *testing.T) {
	report := &clustersReport{Clusters: []clusterReport{
		{Name: "cluster-1", Labels: map[string]string{}, Reachable: true, Version: "v1.36.3", KyvernoAPIs: []string{}, Replica: "policyhub-hub-7d9f-x2"},
		{Name: "ocm-only", Labels: map[string]string{}, Error: "no such cluster"},
	}}
	var out bytes.Buffer
	tw := newTableWriter(&out)
	printClustersTable(tw, report)
	_ = tw.Flush()
	want := `CLUSTER     REPLICA                 REACHABLE   VERSION   ENGINES     KYVERNO     KYVERNO-VERSION   LEGACY-ENFORCED   EXCEPTIONS   LEGACY      SUMMARY-AGE   PACING   FAIL   ERROR   BLOCKED   LABELS
cluster-1   policyhub-hub-7d9f-x2   yes         v1.36.3   <unknown>   <none>      <unknown>         unknown           <unknown>    <unknown>   <none>        -        -      -       -         <none>
ocm-only    <none>                  no          -         <unknown>   <unknown>   <unknown>         unknown           <unknown>    <unknown>   <none>        -        -      -       -         <none>
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", out.String(), want)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A cluster on Kyverno 1.19.0 says its exception namespace does not hold (kyverno#17367), in
// the table's EXCEPTIONS cell and in -o json; 1.19.1 says nothing of it.
func TestClustersWarnOfKyverno1190ExceptionBypass(t *testing.T) {
	facts := func(version string) *kyvernoReport {
		return toKyvernoReport(&policyhubv1.KyvernoFacts{Version: version, PolicyExceptions: ptrTo(true), ExceptionNamespace: "policyhub-system"})
	}
	affected, fixed := facts("v1.19.0"), facts("v1.19.1")
	if got := exceptionsCell(affected); got != "on(ns=policyhub-system, bypassed: kyverno#17367)" {
		t.Errorf("1.19.0 cell %q", got)
	}
	if got := exceptionsCell(fixed); got != "on(ns=policyhub-system)" {
		t.Errorf("1.19.1 cell %q", got)
	}
	data, err := json.Marshal(affected)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"exceptionBypass":"Kyverno 1.19.0 honours`) {
		t.Errorf("1.19.0 JSON: %s", data)
	}
	if data, _ := json.Marshal(fixed); strings.Contains(string(data), "exceptionBypass") {
		t.Errorf("1.19.1 JSON: %s", data)
	}
}

// PACING reads as push interval/heartbeat, without zero units.
func TestPacingCell(t *testing.T) {
	paced := func(push, beat time.Duration) *pacingReport {
		return toPacingReport(&policyhubv1.SummaryPacing{PushInterval: metav1.Duration{Duration: push}, HeartbeatInterval: metav1.Duration{Duration: beat}, Clusters: 5})
	}
	for _, c := range []struct {
		pacing *pacingReport
		want   string
	}{
		{nil, "<none>"},
		{paced(10*time.Second, time.Minute), "10s/1m"},
		{paced(160*time.Second, 2*time.Minute), "2m40s/2m"},
		{paced(1280*time.Second, time.Hour), "21m20s/1h"},
		{paced(20*time.Second, 32*time.Minute), "20s/32m"},
	} {
		if got := pacingCell(c.pacing); got != c.want {
			t.Errorf("%+v: %q, want %q", c.pacing, got, c.want)
		}
	}
}
