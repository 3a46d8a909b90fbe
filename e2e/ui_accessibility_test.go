package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The grid is a table a screen reader can walk and a keyboard can reach: a caption, column and
// row headers, every cell named (cluster, policy, count) and showing its number, so colour is never
// the only sign; labelled filters; the first Tab stop skips to the content.
func TestUIGridIsAccessible(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	// Twelve clusters × eight policies, fails skewed so that the grid's colours all show.
	var worst string
	var worstTotal int64 = -1
	for c := range 12 {
		cluster := fmt.Sprintf("ui-a11y-%02d", c)
		createNamespace(ctx, t, hub, cluster)
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
		s.Spec.Cluster = cluster
		for p := range 8 {
			fail := int64((c*7+p*13)%23) * int64(p%4) * int64(c%5)
			if c == 0 && p == 3 {
				fail = 400
			}
			s.Spec.Policies = append(s.Spec.Policies, policyhubv1.PolicySummary{Name: fmt.Sprintf("a11y-%d", p), Kind: "ClusterPolicy",
				Category: "UI-a11y", Severity: []string{"low", "medium", "high", "critical"}[p%4], Results: policyhubv1.ResultCounts{Fail: fail, Pass: int64(10 + p)}})
			s.Spec.Totals.Fail += fail
			s.Spec.Totals.Pass += int64(10 + p)
		}
		if s.Spec.Totals.Fail > worstTotal {
			worst, worstTotal = cluster, s.Spec.Totals.Fail
		}
		if err := hub.Create(ctx, s); err != nil {
			t.Fatalf("write the summary: %v", err)
		}
		t.Cleanup(func() { _ = client.IgnoreNotFound(hub.Delete(context.Background(), s)) })
	}
	const cluster = "ui-a11y-00"

	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url), chromedp.Navigate(base+"/fleet?category=UI-a11y"),
		chromedp.WaitVisible(chromedp.CSS("#grid"))); err != nil {
		t.Fatal(err)
	}
	for what, js := range map[string]string{
		"the page's language":                       `document.documentElement.lang === "en"`,
		"a caption":                                 `!!document.querySelector("#grid caption") && document.querySelector("#grid caption").innerText.length > 20`,
		"column headers":                            `[...document.querySelectorAll("#grid thead th")].every(th => th.getAttribute("scope") === "col")`,
		"row headers":                               `[...document.querySelectorAll("#grid tbody tr")].every(tr => tr.querySelector("th[scope=row]"))`,
		"eight policy columns":                      `document.querySelectorAll("#grid thead th.pol").length === 8`,
		"every cell named":                          `[...document.querySelectorAll("#grid td.cell")].every(td => /^.+, .+: (\d+ violations|not reported)$/.test(td.getAttribute("aria-label")))`,
		"every cell's number shown":                 `[...document.querySelectorAll("#grid td.cell")].every(td => /^(\d+|—)$/.test(td.innerText.trim()))`,
		"every filter labelled":                     `[...document.querySelectorAll("form.filters input, form.filters select")].every(c => c.closest("label"))`,
		"every link has text":                       `[...document.querySelectorAll("a")].every(a => a.innerText.trim().length > 0)`,
		"the worst cell at the highest colour band": `document.querySelector('td[aria-label="` + cluster + `, a11y-3: 400 violations"]').classList.contains("l3")`,
	} {
		if ok := evaluate[bool](t, tab, js); !ok {
			t.Errorf("%s: %s is false", what, js)
		}
	}
	if first := pageText(t, tab, "#grid tbody th[scope=row]"); first != worst {
		t.Errorf("the first row is %q, want the worst cluster %s (%d violations)", first, worst, worstTotal)
	}
	screenshot(t, tab, "fleet-grid")
	label := evaluate[string](t, tab, `document.querySelector('td[aria-label^="`+cluster+`, a11y-3:"]').getAttribute("aria-label")`)
	if label != cluster+", a11y-3: 400 violations" {
		t.Errorf("a cell is named %q", label)
	}
	if err := browse(t, tab, 10*time.Second, chromedp.KeyEvent(kb.Tab)); err != nil {
		t.Fatal(err)
	}
	if first := evaluate[string](t, tab, "document.activeElement.className"); first != "skip" {
		t.Errorf("the first Tab stop is %q, want the skip link", first)
	}
	if err := browse(t, tab, 10*time.Second, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, 200*time.Millisecond, "the skip link moves focus to the content", func() error {
		if id := evaluate[string](t, tab, "document.activeElement.id"); id != "main" {
			return fmt.Errorf("focus on %q", id)
		}
		return nil
	})
}
