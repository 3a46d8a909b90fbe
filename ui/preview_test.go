package ui

import (
	"fmt"
	"html"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/pages"
	"github.com/policyhub/policyhub/ui/read"
)

// previewSnapshot is a hub with three FleetPolicies: "complete" (a finished preview of
// spec.preview.template), "incomplete" (a rollout's preview gate, 2 of 3 clusters reported) and
// "none" (no preview). What the clusters named is hostile.
func previewSnapshot(now time.Time) *read.Snapshot {
	const hostile = `<script>alert(1)</script>` + "\u202e"
	started, completed := metav1.NewTime(now.Add(-10*time.Minute)), metav1.NewTime(now.Add(-4*time.Minute))
	res := func(name string) policyhubv1.ResourceRef {
		return policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop\u202e", Name: name}
	}
	fp := func(name string) policyhubv1.FleetPolicy {
		f := policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		f.Spec.Template.Kind = "ClusterPolicy"
		return f
	}
	s := &read.Snapshot{Now: now}

	complete := fp("complete")
	complete.Spec.Preview = &policyhubv1.PreviewSpec{Template: &policyhubv1.PolicyTemplate{Kind: "ValidatingPolicy"}}
	complete.Status.Preview = &policyhubv1.PreviewStatus{Revision: "rev" + hostile, Shadow: "policyhub-shadow-" + hostile, StartedAt: &started, CompletedAt: &completed,
		Clusters: 3, Reported: 3, Resources: 120, WouldFail: 17, NewlyFailing: 11,
		FirstNewlyFailing: []policyhubv1.ClusterResource{{Cluster: hostile, Resource: res(`web</td><img src=x onerror=alert(1)>`)}}}
	incomplete := fp("incomplete")
	incomplete.Spec.Rollout = &policyhubv1.Rollout{Waves: []policyhubv1.RolloutWave{{Name: "all"}},
		PreviewGate: &policyhubv1.PreviewGate{MaxWouldFail: ptr(int64(4)), MaxNewlyFailing: ptr(int64(0))}}
	incomplete.Status.Preview = &policyhubv1.PreviewStatus{Revision: "r1", Shadow: "policyhub-shadow-incomplete", StartedAt: &started,
		Clusters: 3, Reported: 2, Resources: 30, WouldFail: 2, NewlyFailing: 1, Same: 27, Differ: 1, OnlyShadow: 2, OnlyLive: 3,
		FirstDiffering: []policyhubv1.ClusterDifference{{Cluster: "quiet", VerdictDifference: policyhubv1.VerdictDifference{
			Resource: res("api\x1b[2J"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictNone}}}}
	s.FleetPolicies = []policyhubv1.FleetPolicy{complete, incomplete, fp("none")}

	slice := func(decl string, clusters ...policyhubv1.ClusterStatus) policyhubv1.ClusterStatusSlice {
		return policyhubv1.ClusterStatusSlice{Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: decl}, Clusters: clusters}
	}
	c := func(name string, p *policyhubv1.ClusterPreview) policyhubv1.ClusterStatus {
		return policyhubv1.ClusterStatus{Name: name, Phase: policyhubv1.ClusterPhaseSynced, Preview: p}
	}
	s.Slices = []policyhubv1.ClusterStatusSlice{
		slice("complete",
			c("quiet", &policyhubv1.ClusterPreview{Reported: true, Resources: 40}),
			c(hostile, &policyhubv1.ClusterPreview{Reported: true, Resources: 40, WouldFail: 12, NewlyFailing: 9,
				FirstNewlyFailing: []policyhubv1.ResourceRef{res(`web</td><img src=x onerror=alert(1)>`)}}),
			c("busy", &policyhubv1.ClusterPreview{Reported: true, Resources: 40, WouldFail: 5, NewlyFailing: 2})),
		slice("incomplete",
			c("quiet", &policyhubv1.ClusterPreview{Reported: true, Resources: 15, WouldFail: 1, Same: 13, OnlyLive: 1}),
			c("late", &policyhubv1.ClusterPreview{Reported: false}),
			c("busy", &policyhubv1.ClusterPreview{Reported: true, Resources: 15, WouldFail: 1, NewlyFailing: 1, Same: 14, Differ: 1, OnlyShadow: 2, OnlyLive: 2})),
		// A preview entry left from before: the page follows status.preview, which "none" has not.
		slice("none", c("busy", &policyhubv1.ClusterPreview{Reported: true, NewlyFailing: 5})),
	}
	return s
}

// section is the Preview section of a declaration's page ("" when it has none): from its heading
// to the next section's.
func section(body string) string {
	_, rest, ok := strings.Cut(body, `<h2 id="preview">`)
	if !ok {
		return ""
	}
	sec, _, _ := strings.Cut(rest, "<h2")
	return sec
}

// rowsOf are the row headers' texts of the table with id, in order.
func rowsOf(html, id string) []string {
	_, table, ok := strings.Cut(html, `id="`+id+`"`)
	if !ok {
		return nil
	}
	table, _, _ = strings.Cut(table, "</table>")
	var rows []string
	for _, tr := range strings.Split(table, `<th scope="row">`)[1:] {
		cell, _, _ := strings.Cut(tr, "</th>")
		if _, text, ok := strings.Cut(cell, `">`); ok && strings.HasPrefix(cell, "<a ") {
			cell, _, _ = strings.Cut(text, "</a>")
		}
		rows = append(rows, cell)
	}
	return rows
}

// inert fails t when the page holds what a cluster named as markup or controls.
func inert(t *testing.T, body string) {
	t.Helper()
	for _, bad := range []string{"<script>alert", "<img src=x", "\u202e", "\x1b"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
}

// A FleetPolicy's page shows its preview: where the candidate is, the shadow, when it started and
// completed (or how many clusters reported so far), the totals (and the comparison with the
// running version when there is one), the clusters most newly failing first, and the resources
// named; what the clusters named is shown as text. A FleetPolicy without a preview has no section.
func TestDeclarationPagePreview(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	s, _ := newTestServer(t, previewSnapshot(now), open)

	body := get(t, s, "/policies/fleetpolicy/complete").Body.String()
	sec := section(body)
	if sec == "" {
		t.Fatalf("no preview section on the page of a FleetPolicy with a preview: %.3000s", body)
	}
	for _, want := range []string{
		"ValidatingPolicy complete, revision rev&lt;script&gt;", html.EscapeString(pages.CandidatePreviewTemplate),
		"policyhub-shadow-&lt;script&gt;alert(1)&lt;/script&gt;",
		"<dt>Started</dt><dd>10m ago (2026-03-04 11:50 UTC)</dd>",
		"<dt>Completed</dt><dd>4m ago (2026-03-04 11:56 UTC), 3 of 3 clusters reported</dd>",
		`<span class="bad">17 would fail</span>`, `<span class="bad">11 newly failing</span>`, "120 resources judged",
		"(1–3 of 3)", "(10 more not named)",
		`<td>shop\u202e</td><td>Deployment</td><td>web&lt;/td&gt;&lt;img src=x onerror=alert(1)&gt;</td>`,
		`Deployment shop\u202e/web&lt;/td&gt;&lt;img src=x onerror=alert(1)&gt; and 8 more`,
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the complete preview does not show %q: %s", want, sec)
		}
	}
	for _, absent := range []string{"so far", "Against the running version", "Gate", `id="preview-differing"`} {
		if strings.Contains(sec, absent) {
			t.Errorf("the complete preview shows %q: %s", absent, sec)
		}
	}
	if got, want := strings.Join(rowsOf(sec, "preview-clusters"), " "), `&lt;script&gt;alert(1)&lt;/script&gt;\u202e busy quiet`; got != want {
		t.Errorf("preview's clusters %q, want %q (most newly failing first)", got, want)
	}
	inert(t, body)

	body = get(t, s, "/policies/fleetpolicy/incomplete").Body.String()
	inert(t, body)
	sec = section(body)
	for _, want := range []string{
		"ClusterPolicy incomplete, revision r1", html.EscapeString(pages.CandidateRolloutGate),
		"<dt>Gate</dt><dd>would fail at most 4 · newly failing at most 0 (the waves wait for it)</dd>",
		`<span class="warn">not yet</span>: 2 of 3 clusters reported so far (the totals are theirs)`,
		"same 27 · differ 1 · only candidate 2 · only running 3",
		`<td class="num">5</td><td class="msg"></td>`, // busy's differing (1 + 2 + 2), none of its newly failing named
		`<td>shop\u202e</td><td>Deployment</td><td>api\x1b[2J</td><td>fail</td><td>none</td>`,
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the incomplete preview does not show %q: %s", want, sec)
		}
	}
	if strings.Contains(sec, `id="preview-newly-failing"`) || strings.Contains(sec, "clusters reported</dd>") {
		t.Errorf("the incomplete preview names newly failing resources it has none of, or says it completed: %s", sec)
	}
	if got, want := strings.Join(rowsOf(sec, "preview-clusters"), " "), "busy quiet late"; got != want {
		t.Errorf("preview's clusters %q, want %q", got, want)
	}
	if !strings.Contains(sec, `<th scope="row"><a href="/clusters/late">late</a></th><td><span class="warn">not yet</span></td><td class="num">—</td>`) {
		t.Errorf("a cluster that has not reported is not shown so: %s", sec)
	}

	body = get(t, s, "/policies/fleetpolicy/none").Body.String()
	if section(body) != "" || strings.Contains(body, "preview-clusters") || strings.Contains(body, "Shadow") {
		t.Errorf("a FleetPolicy without a preview shows one: %s", body)
	}
}

// The preview's clusters are a page at a time, as the page's clusters; the pager's URL is
// served.
func TestDeclarationPagePreviewPages(t *testing.T) {
	now := time.Now()
	snap := previewSnapshot(now)
	sl := &snap.Slices[0]
	sl.Clusters = nil
	n := pages.PageSize + 3
	for i := range n {
		sl.Clusters = append(sl.Clusters, policyhubv1.ClusterStatus{Name: fmt.Sprintf("c%03d", i), Phase: policyhubv1.ClusterPhaseSynced,
			Preview: &policyhubv1.ClusterPreview{Reported: true, NewlyFailing: int64(i)}})
	}
	s, _ := newTestServer(t, snap, open)
	sec := section(get(t, s, "/policies/fleetpolicy/complete").Body.String())
	rows := rowsOf(sec, "preview-clusters")
	if len(rows) != pages.PageSize || rows[0] != fmt.Sprintf("c%03d", n-1) || !strings.Contains(sec, fmt.Sprintf("(1–%d of %d)", pages.PageSize, n)) {
		t.Errorf("first page: %d rows from %v, want %d, most newly failing first", len(rows), rows[:1], pages.PageSize)
	}
	next := `href="/policies/fleetpolicy/complete?ppage=2#preview-clusters" rel="next"`
	if !strings.Contains(sec, next) {
		t.Fatalf("no pager to the preview's next clusters: %s", sec)
	}
	sec = section(get(t, s, "/policies/fleetpolicy/complete?ppage=2").Body.String())
	if rows := rowsOf(sec, "preview-clusters"); strings.Join(rows, " ") != "c002 c001 c000" {
		t.Errorf("second page %v, want the 3 least newly failing", rows)
	}
}
