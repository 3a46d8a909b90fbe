package summarize

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestVerdict(t *testing.T) {
	tests := []struct {
		in   collect.Counts
		want policyhubv1.Verdict
	}{
		{collect.Counts{}, policyhubv1.VerdictNone},
		{collect.Counts{Skip: 2}, policyhubv1.VerdictSkip},
		{collect.Counts{Pass: 1, Skip: 3}, policyhubv1.VerdictPass},
		{collect.Counts{Warn: 1}, policyhubv1.VerdictPass},
		{collect.Counts{Warn: 1, Skip: 1}, policyhubv1.VerdictPass},
		{collect.Counts{Pass: 5, Fail: 1}, policyhubv1.VerdictFail},
		{collect.Counts{Pass: 5, Error: 1, Skip: 1}, policyhubv1.VerdictFail},
		{collect.Counts{Error: 1}, policyhubv1.VerdictFail},
		{collect.Counts{Fail: 1, Warn: 1}, policyhubv1.VerdictFail},
	}
	for _, tt := range tests {
		if got := verdict(tt.in); got != tt.want {
			t.Errorf("verdict(%+v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Keys as the collector gives them: a report's source gives the kind (kyverno: ClusterPolicy or
// Policy; KyvernoValidatingPolicy: ValidatingPolicy or its namespaced kind).
var (
	liveTeam     = collect.PolicyKey{Kind: "ClusterPolicy", Name: "require-team"}
	shadowTeam   = collect.PolicyKey{Kind: "ValidatingPolicy", Name: policyhubv1.ShadowName("require-team")}
	liveLatestVP = collect.PolicyKey{Kind: "ValidatingPolicy", Name: "no-latest"}
	liveLatestCP = collect.PolicyKey{Kind: "ClusterPolicy", Name: "no-latest"}
	shadowLatest = collect.PolicyKey{Kind: "ValidatingPolicy", Name: policyhubv1.ShadowName("no-latest")}
)

func deployment(namespace, name string) collect.Resource {
	return collect.Resource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name)}
}

func deploymentRef(namespace, name string) policyhubv1.ResourceRef {
	return ref(deployment(namespace, name))
}

// judged is a digest of one resource with the given policies' counts.
func judged(r collect.Resource, pcs ...collect.PolicyCounts) *collect.Digest {
	return &collect.Digest{Report: "wgpolicyk8s.io/v1alpha2 PolicyReport " + r.Namespace + "/" + r.Name, Resource: r, Policies: pcs}
}

var (
	passed  = collect.Counts{Pass: 1}
	failed  = collect.Counts{Pass: 1, Fail: 1}
	skipped = collect.Counts{Skip: 1}
)

// shadowSnapshot is a cluster with a live Audit ClusterPolicy requiring a team label and its
// shadow, a ValidatingPolicy requiring team and tier: web has both labels, api team only, db
// neither; the shadow does not match jobs (the live policy skips it: alike), skips batch (the
// live policy does not match it: alike too) and matches cron, which the live policy does not;
// the live policy passes queue, which the shadow does not match.
func shadowSnapshot() collect.Snapshot {
	return collect.Snapshot{
		Digests: []*collect.Digest{
			judged(deployment("shop", "web"), counts(liveTeam, passed), counts(shadowTeam, passed)),
			judged(deployment("shop", "api"), counts(liveTeam, passed), counts(shadowTeam, collect.Counts{Fail: 1, Pass: 1})),
			judged(deployment("shop", "db"), counts(liveTeam, collect.Counts{Fail: 1}), counts(shadowTeam, collect.Counts{Fail: 2})),
			judged(deployment("shop", "jobs"), counts(liveTeam, skipped)),
			judged(deployment("shop", "cron"), counts(shadowTeam, collect.Counts{Warn: 1})),
			judged(deployment("shop", "batch"), counts(shadowTeam, skipped)),
			judged(deployment("shop", "queue"), counts(liveTeam, passed)),
		},
		Policies: map[collect.PolicyKey]collect.PolicyInfo{liveTeam: {Severity: "high"}, shadowTeam: {Severity: "high"}},
		Shadows:  map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "ClusterPolicy/require-team", ContentHash: "sha256:abc"}},
	}
}

func TestSummarizeShadows(t *testing.T) {
	shadowName := shadowTeam.Name
	tests := []struct {
		name string
		in   collect.Snapshot
		want []policyhubv1.ShadowResults
	}{
		{
			name: "a ValidatingPolicy shadow paired with its live ClusterPolicy, resource by resource",
			in:   shadowSnapshot(),
			want: []policyhubv1.ShadowResults{{
				Name: shadowName, Kind: "ValidatingPolicy", Of: "ClusterPolicy/require-team", ContentHash: "sha256:abc",
				Resources: 5, WouldFail: 2, NewlyFailing: 1, Same: 3, Differ: 1, OnlyShadow: 1, OnlyLive: 1,
				FirstNewlyFailing: []policyhubv1.ResourceRef{deploymentRef("shop", "api")},
				FirstDiffering: []policyhubv1.VerdictDifference{
					{Resource: deploymentRef("shop", "api"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass},
					{Resource: deploymentRef("shop", "cron"), Shadow: policyhubv1.VerdictPass, Live: policyhubv1.VerdictNone},
					{Resource: deploymentRef("shop", "queue"), Shadow: policyhubv1.VerdictNone, Live: policyhubv1.VerdictPass},
				},
			}},
		},
		{
			name: "paired with a live ValidatingPolicy, not with a ClusterPolicy of the same name",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					judged(deployment("a", "x"), counts(liveLatestVP, passed), counts(liveLatestCP, failed), counts(shadowLatest, failed)),
					judged(deployment("a", "y"), counts(liveLatestVP, failed), counts(liveLatestCP, passed), counts(shadowLatest, failed)),
				},
				Shadows: map[collect.PolicyKey]collect.ShadowInfo{shadowLatest: {Of: "ValidatingPolicy/no-latest"}},
			},
			want: []policyhubv1.ShadowResults{{
				Name: shadowLatest.Name, Kind: "ValidatingPolicy", Of: "ValidatingPolicy/no-latest",
				Resources: 2, WouldFail: 2, NewlyFailing: 1, Same: 1, Differ: 1,
				FirstNewlyFailing: []policyhubv1.ResourceRef{deploymentRef("a", "x")},
				FirstDiffering:    []policyhubv1.VerdictDifference{{Resource: deploymentRef("a", "x"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass}},
			}},
		},
		{
			name: "a report that does not say the live policy's kind is paired by namespace and name",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					judged(deployment("a", "x"), counts(collect.PolicyKey{Namespace: "a", Name: "limits"}, failed), counts(collect.PolicyKey{Kind: "NamespacedValidatingPolicy", Namespace: "a", Name: policyhubv1.ShadowName("limits")}, passed)),
				},
				Shadows: map[collect.PolicyKey]collect.ShadowInfo{{Kind: "NamespacedValidatingPolicy", Namespace: "a", Name: policyhubv1.ShadowName("limits")}: {Of: "Policy/a/limits"}},
			},
			want: []policyhubv1.ShadowResults{{
				Name: policyhubv1.ShadowName("limits"), Namespace: "a", Kind: "NamespacedValidatingPolicy", Of: "Policy/a/limits",
				Resources: 1, Differ: 1,
				FirstDiffering: []policyhubv1.VerdictDifference{{Resource: deploymentRef("a", "x"), Shadow: policyhubv1.VerdictPass, Live: policyhubv1.VerdictFail}},
			}},
		},
		{
			name: "no live counterpart: every resource the shadow fails is newly failing, every one it judges only its own",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					judged(deployment("a", "x"), counts(liveTeam, failed), counts(shadowTeam, failed)),
					judged(deployment("a", "y"), counts(shadowTeam, passed)),
				},
				Shadows: map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {ContentHash: "sha256:new"}},
			},
			want: []policyhubv1.ShadowResults{{
				Name: shadowName, Kind: "ValidatingPolicy", ContentHash: "sha256:new",
				Resources: 2, WouldFail: 1, NewlyFailing: 1, OnlyShadow: 2,
				FirstNewlyFailing: []policyhubv1.ResourceRef{deploymentRef("a", "x")},
				FirstDiffering: []policyhubv1.VerdictDifference{
					{Resource: deploymentRef("a", "x"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictNone},
					{Resource: deploymentRef("a", "y"), Shadow: policyhubv1.VerdictPass, Live: policyhubv1.VerdictNone},
				},
			}},
		},
		{
			name: "a shadow-of that names no policy pairs with nothing",
			in: collect.Snapshot{
				Digests:  []*collect.Digest{judged(deployment("a", "x"), counts(liveTeam, passed), counts(shadowTeam, failed))},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{shadowTeam: {}},
				Shadows:  map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "require-team"}},
			},
			want: []policyhubv1.ShadowResults{{
				Name: shadowName, Kind: "ValidatingPolicy", Of: "require-team",
				Resources: 1, WouldFail: 1, NewlyFailing: 1, OnlyShadow: 1,
				FirstNewlyFailing: []policyhubv1.ResourceRef{deploymentRef("a", "x")},
				FirstDiffering:    []policyhubv1.VerdictDifference{{Resource: deploymentRef("a", "x"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictNone}},
			}},
		},
		{
			name: "a shadow object with no result yet: a zero entry carrying its shadow-of and content hash",
			in: collect.Snapshot{
				Digests:  []*collect.Digest{judged(deployment("a", "x"), counts(disallowLatest, passed))},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{shadowTeam: {}, liveTeam: {}},
				Shadows:  map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "ClusterPolicy/require-team", ContentHash: "sha256:abc"}},
			},
			want: []policyhubv1.ShadowResults{{Name: shadowName, Kind: "ValidatingPolicy", Of: "ClusterPolicy/require-team", ContentHash: "sha256:abc"}},
		},
		{
			name: "a shadow known from reports only: an entry without shadow-of or content hash",
			in: collect.Snapshot{
				Digests: []*collect.Digest{judged(deployment("a", "x"), counts(liveTeam, passed), counts(shadowTeam, failed))},
			},
			want: []policyhubv1.ShadowResults{{
				Name: shadowName, Kind: "ValidatingPolicy", Resources: 1, WouldFail: 1, NewlyFailing: 1, OnlyShadow: 1,
				FirstNewlyFailing: []policyhubv1.ResourceRef{deploymentRef("a", "x")},
				FirstDiffering:    []policyhubv1.VerdictDifference{{Resource: deploymentRef("a", "x"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictNone}},
			}},
		},
		{
			name: "a kindless shadow key takes the kind of the shadow object: one entry",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					judged(deployment("a", "x"), counts(liveTeam, passed), counts(collect.PolicyKey{Name: shadowName}, failed)),
					judged(deployment("a", "y"), counts(liveTeam, passed), counts(shadowTeam, passed)),
				},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{shadowTeam: {}},
				Shadows:  map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "ClusterPolicy/require-team"}},
			},
			want: []policyhubv1.ShadowResults{{
				Name: shadowName, Kind: "ValidatingPolicy", Of: "ClusterPolicy/require-team",
				Resources: 2, WouldFail: 1, NewlyFailing: 1, Same: 1, Differ: 1,
				FirstNewlyFailing: []policyhubv1.ResourceRef{deploymentRef("a", "x")},
				FirstDiffering:    []policyhubv1.VerdictDifference{{Resource: deploymentRef("a", "x"), Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass}},
			}},
		},
		{
			name: "shadows in order of namespace, name and kind",
			in: collect.Snapshot{
				Policies: map[collect.PolicyKey]collect.PolicyInfo{
					{Kind: "ValidatingPolicy", Name: policyhubv1.ShadowName("b")}:                           {},
					{Kind: "NamespacedValidatingPolicy", Namespace: "a", Name: policyhubv1.ShadowName("a")}: {},
					{Kind: "ClusterPolicy", Name: policyhubv1.ShadowName("b")}:                              {},
					{Kind: "ValidatingPolicy", Name: policyhubv1.ShadowName("a")}:                           {},
					{Kind: "ValidatingPolicy", Name: "not-a-shadow"}:                                        {},
				},
			},
			want: []policyhubv1.ShadowResults{
				{Name: policyhubv1.ShadowName("a"), Kind: "ValidatingPolicy"},
				{Name: policyhubv1.ShadowName("b"), Kind: "ClusterPolicy"},
				{Name: policyhubv1.ShadowName("b"), Kind: "ValidatingPolicy"},
				{Name: policyhubv1.ShadowName("a"), Namespace: "a", Kind: "NamespacedValidatingPolicy"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.in, Options{Cluster: "east-1"})
			if g, w := mustJSON(t, got.Shadows), mustJSON(t, tt.want); g != w {
				t.Errorf("shadows\n%s\nwant\n%s", g, w)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the summary breaks the API's rules: %v", err)
			}
			assertNoShadowCounted(t, got)
		})
	}
}

// assertNoShadowCounted fails when a shadow's name is in any part of the summary that is
// compliance.
func assertNoShadowCounted(t *testing.T, s policyhubv1.PolicyReportSummarySpec) {
	t.Helper()
	for _, p := range s.Policies {
		if policyhubv1.IsShadowName(p.Name) {
			t.Errorf("spec.policies has shadow %s: %+v", p.Name, p)
		}
	}
	for _, a := range s.Applications {
		if strings.Contains(a.Policy, policyhubv1.ShadowPrefix) {
			t.Errorf("spec.applications has shadow %s: %+v", a.Policy, a)
		}
	}
	for _, v := range s.Violations {
		if strings.Contains(v.Policy, policyhubv1.ShadowPrefix) {
			t.Errorf("spec.violations has shadow %s: %+v", v.Policy, v)
		}
	}
}

// withoutShadowResults is s with every shadow's results (and blocks) taken out.
func withoutShadowResults(s collect.Snapshot) collect.Snapshot {
	out := s
	out.Digests = nil
	for _, d := range s.Digests {
		c := *d
		c.Policies = slices.DeleteFunc(slices.Clone(d.Policies), func(pc collect.PolicyCounts) bool { return policyhubv1.IsShadowName(pc.Policy().Name) })
		c.Violations = slices.DeleteFunc(slices.Clone(d.Violations), func(v collect.Violation) bool { return policyhubv1.IsShadowName(v.Policy.Name) })
		if len(c.Policies) > 0 || len(d.Policies) == 0 {
			out.Digests = append(out.Digests, &c)
		}
	}
	out.Blocks = slices.DeleteFunc(slices.Clone(s.Blocks), func(b *collect.Block) bool { return policyhubv1.IsShadowName(b.Policy.Name) })
	return out
}

// A shadow's results — fail, error, a blocked admission, a resource only the shadow judges in a
// namespace of its own, an application's resource — are in no total, policy, application,
// namespace or violation: the summary is the one of the cluster without them, but for
// spec.shadows.
func TestShadowResultsAreNeverCompliance(t *testing.T) {
	s := shadowSnapshot()
	only := deployment("previewed", "web")
	s.Digests = append(s.Digests, judged(only, counts(shadowTeam, collect.Counts{Fail: 3, Error: 1})))
	s.Digests[1].Violations = []collect.Violation{
		{Policy: shadowTeam, Rule: "team-and-tier", Result: "fail", Severity: "critical", Message: "tier is required", Time: t0},
		{Policy: liveTeam, Rule: "team", Result: "fail", Severity: "high", Message: "team is required", Time: t0},
	}
	s.Digests[5].Violations = []collect.Violation{{Policy: shadowTeam, Rule: "team-and-tier", Result: "error", Time: t0}}
	s.Blocks = []*collect.Block{{Policy: shadowTeam, Resource: deployment("shop", "api"), Count: 4, Time: t0}}
	s.Applications = map[types.UID]string{deployment("shop", "api").UID: "shop", only.UID: "preview"}

	got := Summarize(s, Options{Cluster: "east-1"})
	assertNoShadowCounted(t, got)
	// Stated: the live policy's own counts, nothing of the shadow's.
	wantTotals := policyhubv1.ResultCounts{Pass: 3, Fail: 1, Skip: 1}
	if got.Totals != wantTotals || got.Blocked != 0 {
		t.Errorf("totals %+v blocked %d, want %+v and 0", got.Totals, got.Blocked, wantTotals)
	}
	if len(got.Policies) != 1 || got.Policies[0].Name != liveTeam.Name || got.Policies[0].Results != wantTotals {
		t.Errorf("policies %+v, want require-team's alone with %+v", got.Policies, wantTotals)
	}
	if len(got.Namespaces) != 1 || got.Namespaces[0].Namespace != "shop" || got.Namespaces[0].Results != wantTotals {
		t.Errorf("namespaces %+v, want shop's alone with %+v", got.Namespaces, wantTotals)
	}
	if len(got.Violations) != 1 || got.Violations[0].Policy != liveTeam.Name || got.Truncated != nil {
		t.Errorf("violations %+v (truncated %+v), want require-team's one", got.Violations, got.Truncated)
	}
	if len(got.Applications) != 1 || got.Applications[0].Policy != liveTeam.Name || got.Applications[0].Blocked != 0 {
		t.Errorf("applications %+v, want shop × require-team alone, nothing blocked", got.Applications)
	}
	if len(got.Shadows) != 1 || got.Shadows[0].WouldFail != 3 || got.Shadows[0].OnlyShadow != 2 {
		t.Errorf("shadows %+v: want one, failing db, api and previewed/web", got.Shadows)
	}
	// Derived: the same summary as the cluster's without any shadow result.
	want := Summarize(withoutShadowResults(s), Options{Cluster: "east-1"})
	got.Shadows, got.ContentHash, want.Shadows, want.ContentHash = nil, "", nil, ""
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("with shadows\n%s\nwithout\n%s", g, w)
	}
}

// Many newly failing and differing resources: the first ten of each by namespace, kind and
// name, whatever the order of the reports, and the same bytes every time.
func TestShadowNamesTheFirstResourcesDeterministically(t *testing.T) {
	s := collect.Snapshot{
		Policies: map[collect.PolicyKey]collect.PolicyInfo{shadowTeam: {}, liveTeam: {}},
		Shadows:  map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "ClusterPolicy/require-team"}},
	}
	var wantNewly []policyhubv1.ResourceRef
	for i := range 40 {
		ns := fmt.Sprintf("ns-%d", i%3)
		r := deployment(ns, fmt.Sprintf("d-%02d", i))
		if i%4 == 3 {
			r.Kind, r.APIVersion = "StatefulSet", "apps/v1"
		}
		s.Digests = append(s.Digests, judged(r, counts(liveTeam, passed), counts(shadowTeam, failed)))
		wantNewly = append(wantNewly, ref(r))
	}
	slices.SortFunc(wantNewly, compareResourceRef)
	wantNewly = wantNewly[:policyhubv1.MaxShadowNamed]
	if wantNewly[0].Namespace != "ns-0" || wantNewly[0].Name != "d-00" || wantNewly[len(wantNewly)-1].Kind != "Deployment" {
		t.Fatalf("the test's own order is off: %+v", wantNewly)
	}

	want := Summarize(s, Options{Cluster: "east-1"})
	if len(want.Shadows) != 1 {
		t.Fatalf("shadows %+v", want.Shadows)
	}
	e := want.Shadows[0]
	if e.Resources != 40 || e.WouldFail != 40 || e.NewlyFailing != 40 || e.Differ != 40 {
		t.Errorf("counts %+v, want 40 resources, all failing newly", e)
	}
	if !reflect.DeepEqual(e.FirstNewlyFailing, wantNewly) {
		t.Errorf("first newly failing %+v, want %+v", e.FirstNewlyFailing, wantNewly)
	}
	if len(e.FirstDiffering) != policyhubv1.MaxShadowNamed {
		t.Fatalf("first differing: %d, want %d", len(e.FirstDiffering), policyhubv1.MaxShadowNamed)
	}
	for i, d := range e.FirstDiffering {
		if d.Resource != wantNewly[i] || d.Shadow != policyhubv1.VerdictFail || d.Live != policyhubv1.VerdictPass {
			t.Errorf("first differing[%d] = %+v, want %+v fail/pass", i, d, wantNewly[i])
		}
	}
	if err := want.Validate(); err != nil {
		t.Errorf("the summary breaks the API's rules: %v", err)
	}
	wantJSON := mustJSON(t, want)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		if got := mustJSON(t, Summarize(shuffled(s, r), Options{Cluster: "east-1"})); got != wantJSON {
			t.Fatalf("shuffle %d: summary differs:\n%s\nwant\n%s", i, got, wantJSON)
		}
	}
}

// More shadows than a summary keeps: the first 50 by namespace, name and kind; the others'
// results count nowhere either.
func TestSummarizeKeepsAtMostMaxSummaryShadows(t *testing.T) {
	const n = policyhubv1.MaxSummaryShadows + 10
	s := collect.Snapshot{Shadows: map[collect.PolicyKey]collect.ShadowInfo{}}
	d := judged(deployment("a", "x"), counts(liveTeam, passed))
	for i := range n {
		k := collect.PolicyKey{Kind: "ValidatingPolicy", Name: policyhubv1.ShadowName(fmt.Sprintf("p-%02d", i))}
		s.Shadows[k] = collect.ShadowInfo{Of: "ClusterPolicy/require-team"}
		d.Policies = append(d.Policies, counts(k, failed))
	}
	s.Digests = []*collect.Digest{d}
	got := Summarize(s, Options{Cluster: "east-1"})
	if len(got.Shadows) != policyhubv1.MaxSummaryShadows {
		t.Fatalf("%d shadows, want %d", len(got.Shadows), policyhubv1.MaxSummaryShadows)
	}
	for i, e := range got.Shadows {
		if want := policyhubv1.ShadowName(fmt.Sprintf("p-%02d", i)); e.Name != want || e.NewlyFailing != 1 {
			t.Fatalf("shadows[%d] = %s newly failing %d, want %s newly failing 1", i, e.Name, e.NewlyFailing, want)
		}
	}
	if got.Totals != (policyhubv1.ResultCounts{Pass: 1}) || len(got.Policies) != 1 {
		t.Errorf("totals %+v, policies %+v: want require-team's pass alone", got.Totals, got.Policies)
	}
	if got.Truncated == nil || got.Truncated.Shadows != 10 {
		t.Errorf("truncated %+v, want the 10 shadows left out counted", got.Truncated)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the summary breaks the API's rules: %v", err)
	}
}

// The byte bound holds with shadows: their named resources go after the violations and before
// the exceptions, the shadows themselves before the policies; what is kept is always valid.
func TestSummarizeMaxBytesWithShadows(t *testing.T) {
	s := randomSnapshot(5, 400)
	s.Shadows = map[collect.PolicyKey]collect.ShadowInfo{}
	long := strings.Repeat("n", 200)
	for i := range policyhubv1.MaxSummaryShadows {
		k := collect.PolicyKey{Kind: "ValidatingPolicy", Name: policyhubv1.ShadowName(fmt.Sprintf("p-%02d", i))}
		s.Shadows[k] = collect.ShadowInfo{Of: "ClusterPolicy/require-labels", ContentHash: "sha256:" + strings.Repeat("0", 64)}
		for j, d := range s.Digests[:30] {
			r := d.Resource
			r.Name = fmt.Sprintf("%s-%d", long, j)
			s.Digests = append(s.Digests, judged(r, counts(requireLabels, passed), counts(k, failed)))
		}
	}
	full := Summarize(s, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: 1 << 30})
	if len(full.Shadows) != policyhubv1.MaxSummaryShadows || len(full.Shadows[0].FirstNewlyFailing) != policyhubv1.MaxShadowNamed {
		t.Fatalf("unbounded summary: %d shadows naming %d", len(full.Shadows), len(full.Shadows[0].FirstNewlyFailing))
	}
	cut := map[string]bool{}
	limits := []int{3000, 2000, 1000, 1}
	for limit := 400_000; limit > 3000; limit -= 5000 {
		limits = append(limits, limit)
	}
	for _, limit := range limits {
		got := Summarize(s, Options{Cluster: "east-1", MaxViolations: 200, MaxBytes: limit})
		if n := len(mustCompact(t, got)); n >= limit && len(got.Policies)+len(got.Shadows)+len(got.Exceptions)+len(got.Violations)+len(got.Applications)+len(got.Namespaces) > 0 {
			t.Fatalf("limit %d: summary is %d bytes", limit, n)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("limit %d: the summary breaks the API's rules: %v", limit, err)
		}
		named := 0
		for _, e := range got.Shadows {
			named = max(named, len(e.FirstNewlyFailing), len(e.FirstDiffering))
		}
		tr := got.Truncated
		if len(got.Shadows) > 0 && named < policyhubv1.MaxShadowNamed {
			cut["named"] = true
			if len(got.Applications)+len(got.Violations)+len(got.Namespaces) > 0 {
				t.Errorf("limit %d: shadows name %d while %d applications, %d violations, %d namespaces remain", limit, named, len(got.Applications), len(got.Violations), len(got.Namespaces))
			}
		}
		if tr != nil && tr.Exceptions > 0 && len(got.Shadows) > 0 && named > 0 {
			t.Errorf("limit %d: %d exceptions cut while shadows name %d resources", limit, tr.Exceptions, named)
		}
		if len(got.Shadows) < len(full.Shadows) {
			cut["shadows"] = true
			if tr == nil || int(tr.Shadows) != len(full.Shadows)-len(got.Shadows) {
				t.Errorf("limit %d: %d shadows left out, truncated says %+v", limit, len(full.Shadows)-len(got.Shadows), tr)
			}
			if len(got.Exceptions) > 0 {
				t.Errorf("limit %d: %d shadows left out while %d exceptions remain", limit, len(full.Shadows)-len(got.Shadows), len(got.Exceptions))
			}
			for i, e := range got.Shadows {
				if e.Name != full.Shadows[i].Name || e.WouldFail != full.Shadows[i].WouldFail {
					t.Fatalf("limit %d: shadows[%d] = %s, want the first of the full summary's, %s", limit, i, e.Name, full.Shadows[i].Name)
				}
			}
		}
		if tr != nil && tr.Policies > 0 {
			cut["policies"] = true
			if len(got.Shadows) > 0 {
				t.Errorf("limit %d: %d policies cut while %d shadows remain", limit, tr.Policies, len(got.Shadows))
			}
		}
		if got.Totals != full.Totals {
			t.Fatalf("limit %d: totals %+v, want %+v", limit, got.Totals, full.Totals)
		}
	}
	if !cut["named"] || !cut["shadows"] || !cut["policies"] {
		t.Errorf("no limit cut named resources, shadows and policies: %v", cut)
	}
}

// The content hash covers spec.shadows: a shadow appearing, its counts changing, its named
// resources or its version changing, and its going, each make a summary the agent pushes.
func TestHashCoversShadows(t *testing.T) {
	s := shadowSnapshot()
	base := Summarize(s, Options{Cluster: "east-1"})
	changes := map[string]func(*collect.Snapshot){
		"the shadow goes": func(s *collect.Snapshot) {
			*s = withoutShadowResults(*s)
			s.Shadows, s.Policies = nil, map[collect.PolicyKey]collect.PolicyInfo{liveTeam: {Severity: "high"}}
		},
		"a count changes": func(s *collect.Snapshot) {
			s.Digests[0] = judged(deployment("shop", "web"), counts(liveTeam, passed), counts(shadowTeam, failed))
		},
		"a newly failing resource is another": func(s *collect.Snapshot) {
			s.Digests[1] = judged(deployment("shop", "api-2"), counts(liveTeam, passed), counts(shadowTeam, failed))
		},
		"its version changes": func(s *collect.Snapshot) {
			s.Shadows = map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "ClusterPolicy/require-team", ContentHash: "sha256:def"}}
		},
		"a second shadow appears, with no result yet": func(s *collect.Snapshot) {
			s.Shadows = map[collect.PolicyKey]collect.ShadowInfo{
				shadowTeam:   {Of: "ClusterPolicy/require-team", ContentHash: "sha256:abc"},
				shadowLatest: {Of: "ValidatingPolicy/no-latest"},
			}
		},
	}
	for name, change := range changes {
		c := shadowSnapshot()
		change(&c)
		got := Summarize(c, Options{Cluster: "east-1"})
		if got.ContentHash == base.ContentHash {
			t.Errorf("%s: content hash unchanged", name)
		}
		if got.Totals != base.Totals && name != "the shadow goes" {
			t.Errorf("%s: totals %+v, want %+v (a shadow changes no total)", name, got.Totals, base.Totals)
		}
	}
	if again := Summarize(shadowSnapshot(), Options{Cluster: "east-1"}); again.ContentHash != base.ContentHash {
		t.Error("content hash changed with nothing changed")
	}
}
