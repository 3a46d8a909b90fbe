package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// A cluster's agent writes what the view shows: a violation whose message and resource name carry
// markup, script and a right-to-left override runs nothing in a real browser, adds no element to
// the page, and is shown as the text it is (the override escaped, visible).
func TestUIShowsHostileTextInert(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	const cluster = "ui-hostile-e2e"
	createNamespace(ctx, t, hub, cluster)
	s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName}}
	s.Spec.Cluster = cluster
	s.Spec.Totals.Fail = 1
	s.Spec.Policies = []policyhubv1.PolicySummary{{Name: `<b id="injected">p</b>`, Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 1}}}
	s.Spec.Violations = []policyhubv1.Violation{{
		Policy: `<b id="injected">p</b>`, Rule: `<img src=x onerror="window.pwned=1">`, Result: "fail",
		Resource: policyhubv1.ResourceRef{Kind: "Pod", Namespace: "shop", Name: "invoice\u202efdp.exe"},
		Message:  `</td></tr></table><script>window.pwned=2</script><img src=x onerror="window.pwned=3">`,
	}}
	if err := hub.Create(ctx, s); err != nil {
		t.Fatalf("write the summary: %v", err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(hub.Delete(context.Background(), s)) })

	url := startUI(t)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url), chromedp.Navigate(base+"/clusters/"+cluster),
		chromedp.WaitVisible(chromedp.CSS("#violations"))); err != nil {
		t.Fatal(err)
	}
	if pwned := evaluate[float64](t, tab, "window.pwned || 0"); pwned != 0 {
		t.Errorf("the agent's text ran script: window.pwned = %v", pwned)
	}
	if n := evaluate[float64](t, tab, `document.querySelectorAll("#injected, #violations img, #violations script, main script").length`); n != 0 {
		t.Errorf("the agent's text added %v elements to the page", n)
	}
	if rows := evaluate[float64](t, tab, `document.querySelectorAll("#violations tbody tr").length`); rows != 1 {
		t.Errorf("the violations table has %v rows, want 1 (the message must not break out of its cell)", rows)
	}
	text := pageText(t, tab, "#violations")
	for _, shown := range []string{`<script>window.pwned=2</script>`, `<img src=x onerror="window.pwned=1">`, `invoice\u202efdp.exe`} {
		if !strings.Contains(text, shown) {
			t.Errorf("the page does not show %q as text:\n%s", shown, text)
		}
	}
	if strings.Contains(text, "\u202e") {
		t.Error("the right-to-left override reached the page raw")
	}
}
