package ui

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

func newTestServer(t *testing.T, snap *read.Snapshot, guard func(http.Handler) http.Handler) (*Server, *staticSource) {
	t.Helper()
	src := &staticSource{snap: snap, broker: read.NewBroker(), full: map[string]*policyhubv1.PolicyReportSummary{}}
	s, err := New(src, Options{Guard: guard, Now: func() time.Time { return snap.Now }, Coalesce: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s, src
}

func open(h http.Handler) http.Handler { return h }

func get(t *testing.T, h http.Handler, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestPagesAnswer(t *testing.T) {
	s, _ := newTestServer(t, syntheticFleet(12, 6, time.Now()), open)
	for _, tc := range []struct {
		url  string
		code int
		has  string
	}{
		{"/", http.StatusFound, ""},
		{"/fleet", http.StatusOK, "cluster-0010"},
		{"/fleet?kind=ValidatingPolicy", http.StatusOK, "policy-001"},
		{"/fleet?selector=env%20in%20(", http.StatusOK, "selector &#34;env in (&#34;"},
		{"/policies/fleetpolicy/policy-000", http.StatusOK, "cluster-0000"},
		{"/policies/fleetpolicy/nope", http.StatusNotFound, "not found"},
		{"/policies/applicationpolicy/nope", http.StatusNotFound, "no such page"},
		{"/policies/secret/x", http.StatusNotFound, "no such page"},
		{"/clusters/cluster-0003", http.StatusOK, "policy-005"},
		{"/clusters/elsewhere", http.StatusNotFound, "not in the fleet"},
		{"/applications/shop/web", http.StatusOK, "No cluster reports"},
		{"/inventory", http.StatusOK, "cluster-0011"},
		{"/inventory?page=9", http.StatusOK, "Clusters 1–12 of 12"},
		{"/healthz", http.StatusOK, "ok"},
	} {
		rec := get(t, s, tc.url)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.has) {
			t.Errorf("GET %s: %d, want %d with %q; body: %.300s", tc.url, rec.Code, tc.code, tc.has, rec.Body.String())
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/fleet", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /fleet: %d, want 405", rec.Code)
	}
}

func TestPageHeadersAllowOnlyItsOwnScript(t *testing.T) {
	s, _ := newTestServer(t, syntheticFleet(2, 2, time.Now()), open)
	rec := get(t, s, "/fleet")
	for header, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
	} {
		if got := rec.Header().Get(header); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to hold %q", header, got, want)
		}
	}
	if body := rec.Body.String(); strings.Contains(body, "<script>") || strings.Contains(body, " on") && strings.Contains(body, "onclick") {
		t.Error("the page has inline script")
	}
	asset := get(t, s, staticAssets.Script)
	if asset.Code != http.StatusOK || !strings.Contains(asset.Header().Get("Cache-Control"), "immutable") {
		t.Errorf("GET %s: %d, Cache-Control %q", staticAssets.Script, asset.Code, asset.Header().Get("Cache-Control"))
	}
	if rec := get(t, s, "/static/0000/ui.js"); rec.Code != http.StatusNotFound {
		t.Errorf("a static file under another hash: %d, want 404", rec.Code)
	}
}

func TestFragmentIsTheMainOnly(t *testing.T) {
	s, _ := newTestServer(t, syntheticFleet(2, 2, time.Now()), open)
	body := get(t, s, "/fleet", FragmentHeader, "main").Body.String()
	if strings.Contains(body, "<html") || strings.Contains(body, "<main") || !strings.Contains(body, `id="grid"`) {
		t.Errorf("fragment: %.300s", body)
	}
}

// A cluster's agent and Kyverno write the messages: markup in them is shown as text, and
// bidirectional overrides and controls are made visible, never obeyed.
func TestHostileTextIsShownInert(t *testing.T) {
	snap := syntheticFleet(1, 1, time.Now())
	s, src := newTestServer(t, snap, open)
	full := snap.Summaries[0].DeepCopy()
	full.Spec.Violations = []policyhubv1.Violation{{Policy: "policy-000", Rule: `<img src=x onerror=alert(1)>`, Result: "fail",
		Resource: policyhubv1.ResourceRef{Kind: "Pod", Namespace: "shop", Name: "web\u202egnp.exe"},
		Message:  `</td><script>alert(1)</script>` + "\x1b[2J"}}
	src.full[full.Namespace] = full
	body := get(t, s, "/clusters/"+full.Namespace).Body.String()
	for _, bad := range []string{"<script>alert", "<img src=x", "\u202e", "\x1b"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
	for _, shown := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `web\u202egnp.exe`, `\x1b[2J`, "&lt;img src=x"} {
		if !strings.Contains(body, shown) {
			t.Errorf("the page does not show %q", shown)
		}
	}
}

// The inventory page shows what the agents named (an object's name, Kyverno's version source)
// as text, on the page and on the cluster's page.
func TestInventoryShowsHostileTextInert(t *testing.T) {
	snap := syntheticFleet(1, 1, time.Now())
	sum := &snap.Summaries[0]
	sum.Spec.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: "v1.19.1", VersionSource: `<img src=x onerror=alert(1)>`,
		PolicyExceptions: ptr(true), ExceptionNamespace: "exc<b>"}
	sum.Spec.Engine.Legacy = &policyhubv1.LegacyInventory{
		Counts:  []policyhubv1.LegacyCount{{Kind: "ClusterPolicy", Owner: policyhubv1.LegacyOwnerOther, Count: 3}},
		Objects: []policyhubv1.LegacyObject{{Kind: "ClusterPolicy", Name: `</li><script>alert(1)</script>` + "\u202e", Owner: policyhubv1.LegacyOwnerOther}},
	}
	s, src := newTestServer(t, snap, open)
	src.full[sum.Namespace] = sum.DeepCopy()
	for _, page := range []string{"/inventory", "/clusters/" + sum.Namespace} {
		body := get(t, s, page).Body.String()
		for _, bad := range []string{"<script>alert", "<img src=x", "\u202e", "exc<b>"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s holds %q raw", page, bad)
			}
		}
		if !strings.Contains(body, "would fail") && page == "/inventory" {
			t.Errorf("%s does not say the cluster would fail the upgrade gate: %.500s", page, body)
		}
	}
	if body := get(t, s, "/inventory").Body.String(); !strings.Contains(body, "&lt;/li&gt;&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the inventory does not show the object's name as text")
	}
}

func ptr[T any](v T) *T { return &v }

// A wave gated on legacy objects shows what it measured beside its limit; a cluster whose
// Kyverno writes no pass results shows pass as unknown ("-"), never 0, on the declaration's and
// the cluster's pages.
func TestPagesShowLegacyGateAndUnknownPass(t *testing.T) {
	snap := syntheticFleet(2, 1, time.Now())
	fp := &snap.FleetPolicies[0]
	fp.Spec.Rollout = &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "kyverno-canary", Gate: policyhubv1.RolloutGate{MaxLegacyObjects: ptr(int64(0))}}}}
	fp.Status.Rollout = &policyhubv1.RolloutStatus{Revision: "r", CurrentWave: "kyverno-canary", Waves: []policyhubv1.WaveStatus{
		{Name: "kyverno-canary", Phase: policyhubv1.WaveWaiting, LegacyObjects: ptr(int64(7)), Reason: "7 legacy objects in the wave"}}}
	sum := &snap.Summaries[0]
	sum.Spec.Engine.Kyverno = &policyhubv1.KyvernoFacts{Version: "v1.20.0", ReportedResults: []string{"fail"}}
	for i := range snap.Slices {
		for j := range snap.Slices[i].Clusters {
			snap.Slices[i].Clusters[j].Results = &policyhubv1.ResultCounts{Pass: 20}
		}
	}
	s, src := newTestServer(t, snap, open)
	src.full[sum.Namespace] = sum.DeepCopy()
	body := get(t, s, "/policies/fleetpolicy/"+fp.Name).Body.String()
	if !strings.Contains(body, `<td class="num">7 (0)</td>`) {
		t.Errorf("the wave's legacy objects and limit are not shown: %.2000s", body)
	}
	unknownPass := `writes no pass results (--allowedResults)">-</abbr>`
	if strings.Count(body, unknownPass) != 1 || !strings.Contains(body, `<td class="num">20</td>`) {
		t.Errorf("want pass unknown for %s only, 20 for the other cluster: %s", sum.Namespace, body)
	}
	if body := get(t, s, "/clusters/"+sum.Namespace).Body.String(); !strings.Contains(body, unknownPass+" pass") || !strings.Contains(body, "enforces legacy kinds: no") {
		t.Errorf("the cluster page shows a count of pass results, or not its Kyverno: %s", body)
	}
	if body := get(t, s, "/fleet").Body.String(); !strings.Contains(body, "not counted in 1 clusters whose Kyverno writes no pass results") {
		t.Errorf("the fleet's pass total does not say it leaves a cluster out: %.1500s", body)
	}
}

// The local view admits the browser that opened the printed URL first, and no one else: its
// token is traded once for a session cookie of its own; afterwards the URL (or the token as a
// cookie) admits no one, while the signed-in browser may still open it.
func TestLocalGuard(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	s, _ := newTestServer(t, syntheticFleet(1, 1, time.Now()), LocalGuard(addr, "sesame"))
	req := func(host, target, cookie string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Host = host
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: TokenCookie, Value: cookie})
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		return rec
	}
	if rec := req("127.0.0.1:4242", "/fleet", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", rec.Code)
	}
	if rec := req("127.0.0.1:4242", "/fleet?token=wrong", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", rec.Code)
	}
	if rec := req("evil.example:4242", "/fleet?token=sesame", ""); rec.Code != http.StatusForbidden {
		t.Errorf("another Host (DNS rebinding): %d, want 403", rec.Code)
	}
	if rec := req("127.0.0.1:4242", "/fleet", "sesame"); rec.Code != http.StatusUnauthorized {
		t.Errorf("the URL's token as a cookie: %d, want 401", rec.Code)
	}
	rec := req("127.0.0.1:4242", "/fleet?kind=ClusterPolicy&token=sesame", "")
	cookie := rec.Result().Cookies()
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/fleet?kind=ClusterPolicy" || len(cookie) != 1 ||
		!cookie[0].HttpOnly || cookie[0].SameSite != http.SameSiteStrictMode || len(cookie[0].Value) < 20 || cookie[0].Value == "sesame" {
		t.Fatalf("token traded: %d, Location %q, cookies %v; want a redirect and a session cookie of its own", rec.Code, rec.Header().Get("Location"), cookie)
	}
	session := cookie[0].Value
	if rec := req("localhost:4242", "/fleet", session); rec.Code != http.StatusOK {
		t.Errorf("with the session: %d, want 200", rec.Code)
	}
	if rec := req("evil.example:4242", "/fleet", session); rec.Code != http.StatusForbidden {
		t.Errorf("another Host with the session: %d, want 403", rec.Code)
	}
	// The token is spent: the URL admits no one else, however often it is tried.
	for range 2 {
		if rec := req("127.0.0.1:4242", "/fleet?token=sesame", ""); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 ||
			!strings.Contains(rec.Body.String(), "already used") {
			t.Errorf("the URL again, without the session: %d, cookies %v, %q; want 401 saying it was used", rec.Code, rec.Result().Cookies(), rec.Body.String())
		}
	}
	if rec := req("127.0.0.1:4242", "/fleet", "sesame"); rec.Code != http.StatusUnauthorized {
		t.Errorf("the spent token as a cookie: %d, want 401", rec.Code)
	}
	// The signed-in browser opening the URL again is sent on, and keeps its session.
	if rec := req("127.0.0.1:4242", "/fleet?token=sesame", session); rec.Code != http.StatusFound || len(rec.Result().Cookies()) != 0 ||
		rec.Header().Get("Location") != "/fleet" {
		t.Errorf("the URL again, signed in: %d, Location %q, cookies %v; want a redirect, no new cookie", rec.Code, rec.Header().Get("Location"), rec.Result().Cookies())
	}
	if rec := req("127.0.0.1:4242", "/fleet", session); rec.Code != http.StatusOK {
		t.Errorf("the session after the URL was opened again: %d, want 200", rec.Code)
	}
	if rec := req("127.0.0.1:4242", "/healthz", ""); rec.Code != http.StatusOK {
		t.Errorf("health without a token: %d, want 200", rec.Code)
	}
}

func TestNoGuardNoServer(t *testing.T) {
	if _, err := New(&staticSource{}, Options{}); err == nil {
		t.Error("a server without a guard was made")
	}
}

// Changes reach a page as one event per burst, naming each topic once.
func TestEventsCoalesceChanges(t *testing.T) {
	s, src := newTestServer(t, syntheticFleet(1, 1, time.Now()), open)
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		for lines.Scan() {
			if l := lines.Text(); strings.HasPrefix(l, "data: ") {
				return l
			}
		}
		return ""
	}
	// The subscription exists once the handler answered; publish a burst.
	for range 3 {
		src.broker.Publish(read.ClusterTopic("cluster-0000"))
	}
	src.broker.Publish(read.TopicInventory)
	if got, want := next(), `data: ["cluster/cluster-0000","inventory"]`; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
}

// An application's page follows every exception: one the platform keeps in its own namespace may
// name the application's (the page lists it), and its change must refresh the page.
func TestApplicationPageFollowsExceptionsElsewhere(t *testing.T) {
	s, _ := newTestServer(t, syntheticFleet(1, 1, time.Now()), open)
	body := get(t, s, "/applications/shop/web").Body.String()
	_, rest, ok := strings.Cut(body, `data-watch="`)
	watch, _, _ := strings.Cut(rest, `"`)
	if !ok {
		t.Fatal("the page has no data-watch")
	}
	topic := read.ExceptionTopic("policyhub-system", "shop-web-exempt")
	for _, prefix := range strings.Fields(watch) {
		if strings.HasPrefix(topic, prefix) { // as ui.js matches a topic
			return
		}
	}
	t.Errorf("the application page watches %q: a change of %s would not refresh it", watch, topic)
}
