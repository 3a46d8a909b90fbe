package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// `kubectl policyhub ui` reads with the user's own rights: a tenant (the tenant role in its
// namespace) sees its namespace's ApplicationPolicies, no cluster's summary, and a banner saying
// what it may not read and what only in its namespace.
func TestUITenantSeesItsNamespace(t *testing.T) {
	inParallel(t)
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns, user = "ui-tenant-e2e", "dev@ui-tenant"
	createNamespace(ctx, t, directClient(t, fleetOf(t).Hub.Config), ns)
	tenantClient(t, ns, user)
	createApplicationPolicy(t, teamApplicationPolicy("shop-team", ns, "Audit", "cluster-1"))

	url := startUI(t, "--as", user, "-n", ns)
	tab := uiBrowser(t)
	base := url[:strings.Index(url, "/?token=")]
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	banners := pageText(t, tab, "body")
	for _, want := range []string{"You may not read", "policyreportsummaries", "only in namespace " + ns, "applicationpolicies"} {
		if !strings.Contains(banners, want) {
			t.Errorf("the page does not say %q:\n%s", want, banners)
		}
	}
	if rows := evaluate[float64](t, tab, `document.querySelectorAll("#grid tbody th[scope=row]").length`); rows != 0 {
		t.Errorf("the tenant's grid has %v clusters, want none (it may not read summaries)", rows)
	}
	if err := browse(t, tab, 30*time.Second, chromedp.Navigate(base+"/policies/applicationpolicy/"+ns+"/shop-team"),
		chromedp.WaitVisible(chromedp.CSS("#clusters"))); err != nil {
		t.Fatalf("the tenant's own ApplicationPolicy: %v", err)
	}
	if h1 := pageText(t, tab, "h1"); !strings.Contains(h1, "ApplicationPolicy "+ns+"/shop-team") {
		t.Errorf("the ApplicationPolicy's page is headed %q", h1)
	}
}
