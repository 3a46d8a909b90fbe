package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A PolicySet's page in a real browser, over the real hub, Kyverno and agent: its state in the
// cluster with the violations its member found there, following a new violation without a
// reload, and the cluster's link leading to the violation's resource and Kyverno's message.
func TestUIPolicySetPage(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, set, member = "ui-pset-e2e", "ui-pset", "ui-pset-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatal(err)
	}
	policy := strings.Replace(psDeploymentPolicy(member, ns, "team", "Deployments of the set need a team label"), "failureAction: Enforce", "failureAction: Audit", 1)
	createPolicySet(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [cluster-1]}
  source:
    inline:
    - %s
`, set, marshalJSON(object(t, policy).Object)))

	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	page := base + "/policies/policyset/" + set
	row := `document.querySelector('#clusters a[href="/clusters/cluster-1"]')?.closest("tr")`
	cellOf := func(i int) string {
		return evaluate[string](t, tab, fmt.Sprintf(`(%s?.cells[%d]?.textContent || "").trim()`, row, i))
	}
	eventually(t, 3*time.Minute, 2*time.Second, "the set's page shows cluster-1 synced with the member's violation", func() error {
		if err := browse(t, tab, 30*time.Second, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#clusters"))); err != nil {
			return err
		}
		if phase, violations := cellOf(1), cellOf(3); phase != "Synced" || violations != "1" {
			return fmt.Errorf("cluster-1: phase %q, violations %q; want Synced, 1", phase, violations)
		}
		return nil
	})
	if h1 := pageText(t, tab, "h1"); !strings.Contains(h1, set) {
		t.Errorf("the page's heading %q does not name the set", h1)
	}

	// Live: a second violation reaches the row with no navigation.
	evaluate[float64](t, tab, "window.policyhubMarker = 5")
	if err := c1.Create(ctx, shopDeployment(ns, "api", "")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, time.Second, "the set's page follows the new violation", func() error {
		if marker := evaluate[float64](t, tab, "window.policyhubMarker || 0"); marker != 5 {
			return fmt.Errorf("the page was reloaded (marker %v)", marker)
		}
		if got := cellOf(3); got != "2" {
			return fmt.Errorf("cluster-1's violations %q, want 2", got)
		}
		return nil
	})
	screenshot(t, tab, "policyset")

	// Drill down: the cluster's link leads to the violations, with the member's rule and message.
	followToClusterViolations(t, tab, "Deployment "+ns+"/api", member, "need-team", "Deployments of the set need a team label")
}
