package summarize

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

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
// neither; the shadow does not match jobs (the live policy skips it) and matches cron, which the
// live policy does not.
func shadowSnapshot() collect.Snapshot {
	return collect.Snapshot{
		Digests: []*collect.Digest{
			judged(deployment("shop", "web"), counts(liveTeam, passed), counts(shadowTeam, passed)),
			judged(deployment("shop", "api"), counts(liveTeam, passed), counts(shadowTeam, collect.Counts{Fail: 1, Pass: 1})),
			judged(deployment("shop", "db"), counts(liveTeam, collect.Counts{Fail: 1}), counts(shadowTeam, collect.Counts{Fail: 2})),
			judged(deployment("shop", "jobs"), counts(liveTeam, skipped)),
			judged(deployment("shop", "cron"), counts(shadowTeam, collect.Counts{Warn: 1})),
		},
		Policies: map[collect.PolicyKey]collect.PolicyInfo{liveTeam: {Severity: "high"}, shadowTeam: {Severity: "high"}},
		Shadows:  map[collect.PolicyKey]collect.ShadowInfo{shadowTeam: {Of: "ClusterPolicy/require-team", ContentHash: "sha256:abc"}},
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
	wantTotals := policyhubv1.ResultCounts{Pass: 2, Fail: 1, Skip: 1}
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
	// Derived: the same summary as the cluster's without any shadow result.
	want := Summarize(withoutShadowResults(s), Options{Cluster: "east-1"})
	got.Shadows, got.ContentHash, want.Shadows, want.ContentHash = nil, "", nil, ""
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("with shadows\n%s\nwithout\n%s", g, w)
	}
}
