package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The Legacy inventory page, reached from every page's navigation, in a browser: a table a screen
// reader can walk (caption, column and row headers), the cluster that would fail Kyverno 1.20's
// upgrade first with its reason and its objects' names shown as text (markup in a name stays
// text), every link named.
func TestUIInventoryPageIsAccessible(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	for i, objects := range []int64{0, 3} {
		cluster := fmt.Sprintf("ui-inventory-%d", i)
		createNamespace(ctx, t, hub, cluster)
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
		s.Spec.Cluster = cluster
		s.Spec.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: "v1.19.1"}
		s.Spec.Engine.Legacy = &policyhubv1.LegacyInventory{}
		if objects > 0 {
			s.Spec.Engine.Legacy.Counts = []policyhubv1.LegacyCount{{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: objects}}
			s.Spec.Engine.Legacy.Objects = []policyhubv1.LegacyObject{{Kind: "ClusterPolicy", Name: "x<img-src-x>", Owner: policyhubv1.LegacyOwnerOther}}
		}
		if err := hub.Create(ctx, s); err != nil {
			t.Fatalf("write the summary: %v", err)
		}
		t.Cleanup(func() { _ = client.IgnoreNotFound(hub.Delete(context.Background(), s)) })
	}

	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url), chromedp.Navigate(base+"/fleet"),
		chromedp.Click(`nav a[href="/inventory"]`, chromedp.NodeVisible), chromedp.WaitVisible(chromedp.CSS("#inventory"))); err != nil {
		t.Fatal(err)
	}
	for what, js := range map[string]string{
		"a caption":             `document.querySelector("#inventory caption").innerText.length > 20`,
		"column headers":        `[...document.querySelectorAll("#inventory thead th")].every(th => th.getAttribute("scope") === "col")`,
		"row headers":           `[...document.querySelectorAll("#inventory tbody tr")].every(tr => tr.querySelector("th[scope=row]"))`,
		"every link has text":   `[...document.querySelectorAll("a")].every(a => a.innerText.trim().length > 0)`,
		"the blocked one first": `document.querySelector("#inventory tbody th[scope=row]").innerText.startsWith("ui-inventory-1")`,
		"its reason":            `document.querySelector("#cluster-ui-inventory-1").innerText.includes("would fail") && document.querySelector("#cluster-ui-inventory-1").innerText.includes("Kyverno 1.20")`,
		"the name as text":      `!document.querySelector("#inventory img") && document.querySelector("#cluster-ui-inventory-1 details").textContent.includes("x<img-src-x>")`,
	} {
		if ok := evaluate[bool](t, tab, js); !ok {
			t.Errorf("%s: %s is false", what, js)
		}
	}
	screenshot(t, tab, "legacy-inventory")
}
