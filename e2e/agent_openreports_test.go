package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// cluster-2's reports controller runs with --openreportsEnabled (see TestMain): its results come
// as openreports.io Reports, cluster-1's as wgpolicyk8s.io PolicyReports. The same violation in
// both gives the same summary entries and the same FleetPolicy results.
func TestAgentOpenReportsGiveTheSameSummary(t *testing.T) {
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	startAgent(t, "cluster-2")
	ctx := testContext(t)
	const ns, name = "agent-openreports", "agent-openreports-team"
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		createNamespace(ctx, t, directClient(t, fleetOf(t).Cluster(cluster).Config), ns)
	}
	createFleetPolicy(t, teamLabelPolicy(name, ns, "Audit", "cluster-1", "cluster-2"))
	waitFleetPolicy(t, name, "synced in both clusters", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}))
	for _, cluster := range []string{"cluster-1", "cluster-2"} {
		if err := directClient(t, fleetOf(t).Cluster(cluster).Config).Create(ctx, shopDeployment(ns, "web", "")); err != nil {
			t.Fatal(err)
		}
	}
	fp := waitResults(t, name, "fail ≥ 1 in both clusters", func(fp *fleetView) error {
		for _, cluster := range []string{"cluster-1", "cluster-2"} {
			if s := clusterStatus(fp, cluster); s == nil || s.Results == nil || s.Results.Fail < 1 {
				return fmt.Errorf("%s: %+v", cluster, s)
			}
		}
		return nil
	})
	if r1, r2 := clusterStatus(fp, "cluster-1").Results, clusterStatus(fp, "cluster-2").Results; *r1 != *r2 {
		t.Errorf("results differ: cluster-1 %+v, cluster-2 (openreports) %+v", *r1, *r2)
	}

	// Where the results came from: openreports.io in cluster-2, wgpolicyk8s.io in cluster-1.
	reportsIn := func(cluster, apiVersion, kind string) int {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(apiVersion)
		list.SetKind(kind + "List")
		if err := directClient(t, fleetOf(t).Cluster(cluster).Config).List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatalf("list %s in %s: %v", kind, cluster, err)
		}
		return len(list.Items)
	}
	if n := reportsIn("cluster-2", "openreports.io/v1alpha1", "Report"); n < 1 {
		t.Errorf("cluster-2 has no openreports Report in %s", ns)
	}
	if n := reportsIn("cluster-2", "wgpolicyk8s.io/v1alpha2", "PolicyReport"); n != 0 {
		t.Errorf("cluster-2 has %d wgpolicyk8s PolicyReports: the test would not prove openreports are read", n)
	}
	if n := reportsIn("cluster-1", "wgpolicyk8s.io/v1alpha2", "PolicyReport"); n < 1 {
		t.Errorf("cluster-1 has no wgpolicyk8s PolicyReport in %s", ns)
	}

	// The summaries' entries for the policy and for the application are the same.
	entries := func(cluster string) (policyhubv1.PolicySummary, []policyhubv1.ApplicationSummary, []string) {
		s, err := hubSummaryOf(t, cluster)
		if err != nil {
			t.Fatal(err)
		}
		var p policyhubv1.PolicySummary
		for _, e := range s.Spec.Policies {
			if e.Name == name {
				p = e
			}
		}
		var apps []policyhubv1.ApplicationSummary
		for _, a := range s.Spec.Applications {
			if a.Namespace == ns {
				apps = append(apps, a)
			}
		}
		return p, apps, s.Spec.Engine.ReportAPIs
	}
	// Attributing results to applications needs the resources' labels, read by an informer that
	// starts with the first report about a kind: the entries may lag a push behind.
	var apis1, apis2 []string
	eventually(t, 60*time.Second, 500*time.Millisecond, "the same policy and application entries in both summaries", func() error {
		var p1, p2 policyhubv1.PolicySummary
		var apps1, apps2 []policyhubv1.ApplicationSummary
		p1, apps1, apis1 = entries("cluster-1")
		p2, apps2, apis2 = entries("cluster-2")
		if p1.Name == "" || fmt.Sprint(p1) != fmt.Sprint(p2) {
			return fmt.Errorf("policy entries differ:\ncluster-1 %+v\ncluster-2 %+v", p1, p2)
		}
		if len(apps1) == 0 || fmt.Sprint(apps1) != fmt.Sprint(apps2) {
			return fmt.Errorf("application entries differ:\ncluster-1 %+v\ncluster-2 %+v", apps1, apps2)
		}
		return nil
	})
	if !slices.Contains(apis2, "openreports.io/v1alpha1") || !slices.Contains(apis1, "wgpolicyk8s.io/v1alpha2") {
		t.Errorf("engine report APIs: cluster-1 %v, cluster-2 %v", apis1, apis2)
	}
}
