package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A FleetPolicy's page shows its rollout as the hub measures it — each wave's phase, the fail
// count measured beside the gate's maximum, the reason it waits — and the exceptions to it; when
// the violation is fixed, the page follows the wave's promotion without a reload.
func TestUIPolicyPageShowsWavesAndExceptions(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	startAgentBeating(t, "cluster-1", 2*time.Second)
	ctx := testContext(t)
	const ns, name = "ui-rollout-e2e", "ui-rollout-team"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)
	if err := c1.Create(ctx, shopDeployment(ns, "web", "")); err != nil {
		t.Fatal(err)
	}
	createFleetPolicy(t, rolloutPolicy(name, ns, `
    - name: staging
      clusters: [cluster-1]
      gate: {maxFail: 0, soak: 2s}
    - name: prod
      clusters: [cluster-2]`, "team"))
	waitResults(t, name, "staging holds on its fail count", func(fp *fleetView) error {
		if w := wave(fp, "staging"); w.Phase != policyhubv1.WaveWaiting || w.Fail < 1 {
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	})
	ex := approvedException(t, fmt.Sprintf(`
metadata: {name: ui-legacy, namespace: %s}
spec:
  target: {kind: FleetPolicy, name: %s}
  resources: {namespaces: [%s], kinds: [Deployment], names: ["legacy-*"]}
  clusters: {names: [cluster-1]}
  owner: platform
  reason: legacy Deployments until their migration
  ticket: UI-7
  expiresAt: %s`, e2eHubNamespace, name, ns, expiresIn(time.Hour)))
	waitException(t, ex, "Active", exceptionState(policyhubv1.ExceptionActive))

	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url), chromedp.Navigate(base+"/policies/fleetpolicy/"+name),
		chromedp.WaitVisible(chromedp.CSS("#waves"))); err != nil {
		t.Fatal(err)
	}
	// The exception made a new version of the policy for cluster-1: until its agent reports on
	// that version the wave says so, then again that it holds on its fail count.
	var staging string
	eventually(t, time.Minute, time.Second, "the staging wave's row shows its gate", func() error {
		if err := browse(t, tab, 30*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#waves"))); err != nil {
			return err
		}
		staging = evaluate[string](t, tab, `document.querySelector("#waves tbody tr:nth-child(1)").innerText`)
		for _, want := range []string{"staging", "Waiting", "(0)", "fail results, at most 0 allowed"} {
			if !strings.Contains(staging, want) {
				return fmt.Errorf("the staging wave's row lacks %q: %q", want, staging)
			}
		}
		return nil
	})
	if prod := evaluate[string](t, tab, `document.querySelector("#waves tbody tr:nth-child(2)").innerText`); !strings.Contains(prod, "prod") || !strings.Contains(prod, "Pending") {
		t.Errorf("the prod wave's row: %q", prod)
	}
	exceptions := pageText(t, tab, "#exceptions")
	for _, want := range []string{e2eHubNamespace + "/ui-legacy", "Active", "platform", "UI-7", "legacy Deployments until their migration"} {
		if !strings.Contains(exceptions, want) {
			t.Errorf("the exceptions lack %q:\n%s", want, exceptions)
		}
	}
	screenshot(t, tab, "rollout")

	// Fixed: staging's count reaches 0, the wave is promoted; the open page follows.
	evaluate[float64](t, tab, "window.policyhubMarker = 3")
	labelDeployment(ctx, t, "cluster-1", ns, "web", map[string]string{"team": "shop"})
	eventually(t, 3*time.Minute, time.Second, "the page follows staging's promotion", func() error {
		if marker := evaluate[float64](t, tab, "window.policyhubMarker || 0"); marker != 3 {
			return fmt.Errorf("the page was reloaded (marker %v)", marker)
		}
		row := evaluate[string](t, tab, `document.querySelector("#waves tbody tr:nth-child(1)").innerText`)
		if !strings.Contains(row, "Enforcing") && !strings.Contains(row, "Done") {
			return fmt.Errorf("staging: %q", row)
		}
		return nil
	})
}
