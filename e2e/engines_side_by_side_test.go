package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// One declaration per engine on a mixed fleet: Kyverno's on cluster-1, Gatekeeper's on
// gatekeeperCluster (no Kyverno), a ValidatingAdmissionPolicy on kubernetesCluster (neither:
// only its API server), each with a violating Deployment that was there before it.
// `kubectl policyhub status` shows them side by side, each row naming its engine with that
// engine's results (Gatekeeper's passes unknown, never 0); `clusters` names each cluster's
// engines; the Gatekeeper declaration also placed on kubernetesCluster is Unsupported there,
// naming Gatekeeper, and is not retried (no error storm); the web view's grid filters by engine
// and shows each cluster's engines, and a cluster's page names each policy's engine.
func TestEnginesSideBySideOnAMixedFleet(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	for _, c := range []string{"cluster-1", gatekeeperCluster, kubernetesCluster} {
		startAgent(t, c)
	}
	ctx := testContext(t)
	const ns, kind = "engines-mixed", "E2eMixedTeam"
	for _, c := range []string{"cluster-1", gatekeeperCluster, kubernetesCluster} {
		cc := directClient(t, fleetOf(t).Cluster(c).Config)
		createNamespace(ctx, t, cc, ns)
		if err := cc.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	both := func(yaml string) string {
		return strings.Replace(yaml, "clusters: ["+gatekeeperCluster+"]", "clusters: ["+gatekeeperCluster+", "+kubernetesCluster+"]", 1)
	}
	createFleetPolicy(t, teamLabelPolicy("engines-mixed-kyverno", ns, "Audit", "cluster-1"))
	createFleetPolicy(t, both(gatekeeperRegoTemplate("engines-mixed-template", kind)))
	createFleetPolicy(t, both(gatekeeperConstraint("engines-mixed-gatekeeper", "Audit", kind, ns)))
	logGatekeeperOnFailure(t, kind)
	createFleetPolicy(t, vapTeamPolicy("engines-mixed-kubernetes", "Audit", kubernetesCluster, ns))

	failsIn := func(cluster string) func(*fleetView) error {
		return func(fp *fleetView) error {
			s := clusterStatus(fp, cluster)
			if s == nil || s.Phase != policyhubv1.ClusterPhaseSynced || s.Results == nil || s.Results.Fail < 1 {
				return fmt.Errorf("%s: %+v; want Synced with the violation reported", cluster, s)
			}
			return nil
		}
	}
	waitResults(t, "engines-mixed-kyverno", "Kyverno's violation in cluster-1", failsIn("cluster-1"))
	waitResults(t, "engines-mixed-kubernetes", "the agent's evaluation in "+kubernetesCluster, failsIn(kubernetesCluster))
	unsupported := waitResults(t, "engines-mixed-gatekeeper", "Gatekeeper's audit in "+gatekeeperCluster+", Unsupported in "+kubernetesCluster, func(fp *fleetView) error {
		if err := failsIn(gatekeeperCluster)(fp); err != nil {
			return err
		}
		s := clusterStatus(fp, kubernetesCluster)
		if s == nil || s.Phase != policyhubv1.ClusterPhaseUnsupported || !strings.Contains(s.Message, "Gatekeeper") {
			return fmt.Errorf("%s: %+v; want Unsupported naming Gatekeeper", kubernetesCluster, s)
		}
		return nil
	})
	// No error storm: the cluster without Gatekeeper is not retried while nothing changes.
	hub := directClient(t, fleetOf(t).Hub.Config)
	before := clusterStatus(unsupported, kubernetesCluster)
	holds(t, 5*time.Second, "the Unsupported cluster is left alone", func() error {
		fp, err := fleetPolicyWithClusters(ctx, hub, "engines-mixed-gatekeeper")
		if err != nil {
			return err
		}
		now := clusterStatus(fp, kubernetesCluster)
		if now == nil || now.Phase != before.Phase || !now.LastSyncTime.Equal(before.LastSyncTime) {
			return fmt.Errorf("%s changed: %+v, was %+v", kubernetesCluster, now, before)
		}
		return nil
	})

	// The CLI: one row per declaration and cluster, naming the engine.
	names := []string{"engines-mixed-gatekeeper", "engines-mixed-kubernetes", "engines-mixed-kyverno"}
	code, out, errOut := cliReadRun(t, append([]string{"status"}, names...)...)
	if code != app.ExitFindings || errOut != "" {
		t.Fatalf("status: exit %d, stderr %q\n%s", code, errOut, out)
	}
	for _, row := range []string{
		`FleetPolicy/engines-mixed-gatekeeper\s+` + gatekeeperCluster + `\s+Gatekeeper\s+Synced\s`,
		`FleetPolicy/engines-mixed-gatekeeper\s+` + kubernetesCluster + `\s+Gatekeeper\s+Unsupported\s.*the cluster runs Kubernetes, not Gatekeeper`,
		`FleetPolicy/engines-mixed-kubernetes\s+` + kubernetesCluster + `\s+Kubernetes\s+Synced\s`,
		`FleetPolicy/engines-mixed-kyverno\s+cluster-1\s+Kyverno\s+Synced\s`,
	} {
		if !regexp.MustCompile(`(?m)^` + row).MatchString(out) {
			t.Errorf("status table lacks a row matching %s:\n%s", row, out)
		}
	}
	_, out, _ = cliReadRun(t, append([]string{"status", "-o", "json"}, names...)...)
	var report struct {
		Declarations []struct {
			Name    string
			Engines []string
			Results map[string]*int64
		}
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	for _, d := range report.Declarations {
		wantEngine := map[string]string{"engines-mixed-gatekeeper": "Gatekeeper", "engines-mixed-kubernetes": "Kubernetes", "engines-mixed-kyverno": "Kyverno"}[d.Name]
		if !slices.Equal(d.Engines, []string{wantEngine}) || d.Results["fail"] == nil || *d.Results["fail"] < 1 {
			t.Errorf("%s: engines %v, results %v; want [%s] with its fail", d.Name, d.Engines, d.Results, wantEngine)
		}
		if pass := d.Results["pass"]; (wantEngine == "Gatekeeper") != (pass == nil) {
			t.Errorf("%s: pass %v; unknown (null) exactly for Gatekeeper, whose audit counts no passes", d.Name, pass)
		}
	}
	_, out, _ = cliReadRun(t, "clusters", "cluster-1", gatekeeperCluster, kubernetesCluster, "-o", "json")
	var clusters struct {
		Clusters []struct {
			Name    string
			Summary *struct{ Engines []string }
		}
	}
	if err := json.Unmarshal([]byte(out), &clusters); err != nil {
		t.Fatalf("clusters -o json: %v\n%s", err, out)
	}
	wantEngines := map[string][]string{"cluster-1": {"Kyverno", "Kubernetes"}, gatekeeperCluster: {"Kubernetes", "Gatekeeper"}, kubernetesCluster: {"Kubernetes"}}
	for _, c := range clusters.Clusters {
		if c.Summary == nil || !slices.Equal(c.Summary.Engines, wantEngines[c.Name]) {
			t.Errorf("clusters: %s runs %+v, want %v", c.Name, c.Summary, wantEngines[c.Name])
		}
	}

	// The web view: the grid filtered by engine, each row's engines, a cluster page's policies.
	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url), chromedp.Navigate(base+"/fleet?engine=Gatekeeper"),
		chromedp.WaitVisible(chromedp.CSS("#grid"))); err != nil {
		t.Fatal(err)
	}
	grid := pageText(t, tab, "#grid")
	if !strings.Contains(grid, "engines-mixed-gatekeeper") || strings.Contains(grid, "engines-mixed-kyverno") || strings.Contains(grid, "engines-mixed-kubernetes") {
		t.Errorf("the grid filtered to Gatekeeper shows:\n%s", grid)
	}
	if !evaluate[bool](t, tab, `[...document.querySelectorAll("#grid tbody tr")].some(tr => tr.innerText.includes("`+gatekeeperCluster+`") && tr.innerText.includes("Kubernetes, Gatekeeper"))`) {
		t.Errorf("no grid row shows %s's engines:\n%s", gatekeeperCluster, grid)
	}
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(base+"/clusters/"+gatekeeperCluster), chromedp.WaitVisible(chromedp.CSS("#policies"))); err != nil {
		t.Fatal(err)
	}
	policies := pageText(t, tab, "#policies")
	if !regexp.MustCompile(`engines-mixed-gatekeeper\s+Gatekeeper\s+` + kind).MatchString(policies) {
		t.Errorf("%s's page does not name the Constraint's engine:\n%s", gatekeeperCluster, policies)
	}
	screenshot(t, tab, "engines-side-by-side")
}
