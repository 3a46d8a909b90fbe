package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// The web view in a real browser, over the real hub, Kyverno and agent: the fleet grid shows the
// violation the test made, its links lead to the policy, the cluster (with the resource, rule and
// Kyverno's message) and the application; and the pages follow new violations without a reload.
func TestUIViews(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, policy = "ui-e2e", "ui-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	createFleetPolicy(t, teamLabelPolicy(policy, ns, "Audit", "cluster-1"))
	waitFleetPolicy(t, policy, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatalf("Audit mode must let the Deployment in: %v", err)
	}

	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	if loc := evaluate[string](t, tab, "location.href"); strings.Contains(loc, "token") || !strings.HasSuffix(loc, "/fleet") {
		t.Errorf("after the token: at %s, want /fleet with the token gone from the address", loc)
	}

	// Fleet: the cell of cluster-1 × the policy counts the violation.
	// Filtered to the policy's category (Ownership): the summaries may report other policies.
	fleet := base + "/fleet?category=Ownership"
	cell := fmt.Sprintf(`td[aria-label^="cluster-1, %s:"]`, policy)
	eventually(t, 3*time.Minute, 2*time.Second, "the grid shows cluster-1's violation", func() error {
		if err := browse(t, tab, 30*time.Second, chromedp.Navigate(fleet)); err != nil {
			return err
		}
		if got := pageText(t, tab, cell); got != "1" {
			return fmt.Errorf("cell %s = %q, want 1", cell, got)
		}
		return nil
	})
	if other := evaluate[string](t, tab, `[...document.querySelectorAll("#grid thead th.pol")].map(th => th.title).filter(t => !t.includes("category Ownership")).join("; ")`); other != "" {
		t.Errorf("filtered by category Ownership, the grid shows %s", other)
	}
	screenshot(t, tab, "fleet")

	// Drill down: the column's link leads to the FleetPolicy.
	if err := browse(t, tab, 30*time.Second, chromedp.Click(chromedp.CSS(`#grid a[href="/policies/fleetpolicy/`+policy+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#clusters"))); err != nil {
		t.Fatalf("follow the policy's link: %v", err)
	}
	if text := pageText(t, tab, "#clusters"); !strings.Contains(text, "cluster-1") || !strings.Contains(text, "Synced") {
		t.Errorf("the FleetPolicy's page, clusters:\n%s", text)
	}
	screenshot(t, tab, "policy")

	// …and its cluster's link to the cluster, with the violation's resource, rule and message.
	followToClusterViolations(t, tab, "Deployment "+ns+"/web", policy, "need-team", "Deployments need a team label")
	if ns := pageText(t, tab, "#namespaces"); !strings.Contains(ns, "ui-e2e\t1") || strings.Contains(ns, "does not count namespaces") {
		t.Errorf("the cluster's namespaces, as its agent counts them, do not show ui-e2e with 1 violation:\n%s", ns)
	}
	screenshot(t, tab, "cluster")

	// …and the application's link to the application's page.
	if err := browse(t, tab, 30*time.Second, chromedp.Click(chromedp.CSS(`#applications a[href="/applications/`+ns+`/shop"]`)),
		chromedp.WaitVisible(chromedp.CSS("#results"))); err != nil {
		t.Fatalf("follow the application's link: %v", err)
	}
	if text := pageText(t, tab, "#results"); !strings.Contains(text, "cluster-1") || !strings.Contains(text, policy) {
		t.Errorf("the application's results:\n%s", text)
	}
	// …the same as `kubectl policyhub info` says.
	code, out, errOut := cliReadRun(t, "info", "shop", "-n", ns, "-o", "json")
	var info struct {
		Totals  struct{ Fail int64 }
		Results []struct{ Cluster, Policy string }
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || code == app.ExitError {
		t.Fatalf("kubectl policyhub info: exit %d, %v; %s", code, err, errOut)
	}
	if rows := evaluate[float64](t, tab, `document.querySelectorAll("#results tbody th[scope=row]").length`); int(rows) != len(info.Results) {
		t.Errorf("the application's page has %v result rows, kubectl policyhub info %d", rows, len(info.Results))
	}
	if facts := pageText(t, tab, "dl.facts"); !strings.Contains(facts, fmt.Sprintf("%d fail", info.Totals.Fail)) {
		t.Errorf("the application's page says %q, kubectl policyhub info %d fail", facts, info.Totals.Fail)
	}
	screenshot(t, tab, "application")

	// Live: a new violation changes the grid's cell with no navigation (the page's own state stays).
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(fleet)); err != nil {
		t.Fatal(err)
	}
	evaluate[float64](t, tab, "window.policyhubMarker = 42")
	if err := c1.Create(ctx, shopDeployment(ns, "api", "")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, time.Second, "the grid follows the new violation", func() error {
		if marker := evaluate[float64](t, tab, "window.policyhubMarker || 0"); marker != 42 {
			return fmt.Errorf("the page was reloaded (marker %v)", marker)
		}
		if got := pageText(t, tab, cell); got != "2" {
			return fmt.Errorf("cell = %q, want 2", got)
		}
		return nil
	})
	if updated, _ := strconv.Atoi(evaluate[string](t, tab, `document.getElementById("main").getAttribute("data-updated") || "0"`)); updated < 1 {
		t.Errorf("main was updated %d times, want at least once", updated)
	}

	// …and the cluster's page lists it.
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(base+"/clusters/cluster-1")); err != nil {
		t.Fatal(err)
	}
	evaluate[float64](t, tab, "window.policyhubMarker = 7")
	if err := c1.Create(ctx, shopDeployment(ns, "db", "")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, time.Second, "the cluster's page follows the new violation", func() error {
		if marker := evaluate[float64](t, tab, "window.policyhubMarker || 0"); marker != 7 {
			return fmt.Errorf("the page was reloaded (marker %v)", marker)
		}
		if text := pageText(t, tab, "#violations"); !strings.Contains(text, "Deployment "+ns+"/db") {
			return fmt.Errorf("violations:\n%s", text)
		}
		return nil
	})
}
