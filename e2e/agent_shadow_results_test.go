package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Shadows end to end on the real Kyverno 1.19 (issue 46). In cluster-1, a live Audit
// ClusterPolicy requires a team label on the namespace's Deployments, and its shadow — a
// ValidatingPolicy with admission off and background scans on, labelled and annotated as the hub
// ships shadows — requires team and tier. Of three Deployments (both labels, team only,
// neither), the shadow would fail two, one of them newly: the agent's summary says so in
// spec.shadows, as Kyverno's own PolicyReports do, and counts the shadow's results nowhere else.
// Labelling the team-only Deployment with a tier changes the shadow's counts, and deleting the
// shadow removes its entry: each is pushed.
func TestAgentShadowResultsReportedApart(t *testing.T) {
	// Parallel: its namespace, Deployments and policies are its own (both policies match only
	// its namespace), and it asserts on what its policies add to the shared summary, never on
	// the whole cluster's.
	inParallel(t)
	startAgent(t, "cluster-1")
	ctx := testContext(t)
	const ns, live = "agent-shadow", "agent-shadow-require-team"
	shadow := policyhubv1.ShadowName(live)
	const contentHash = "sha256:5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"
	c1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, c1, ns)

	for _, d := range []struct{ name, team, tier string }{{"both", "shop", "web"}, {"team-only", "shop", ""}, {"neither", "", ""}} {
		deploy := shopDeployment(ns, d.name, d.team)
		if d.tier != "" {
			deploy.Labels["tier"] = d.tier
		}
		if err := c1.Create(ctx, deploy); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	livePolicy := object(t, fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: true
  rules:
  - name: need-team
    match:
      any:
      - resources:
          kinds: [Deployment]
          namespaces: [%s]
    validate:
      failureAction: Audit
      message: "Deployments need a team label"
      pattern:
        metadata:
          labels:
            team: "?*"
`, live, ns))
	shadowPolicy := object(t, fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: %s
  labels: {%s: %q}
  annotations: {%s: %q, %s: %q}
spec:
  validationActions: [Audit]
  evaluation:
    admission: {enabled: false}
    background: {enabled: true}
%s  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels && 'tier' in object.metadata.labels"
    message: Deployments need a team and a tier label
`, shadow, policyhubv1.LabelShadow, policyhubv1.ShadowValue,
		policyhubv1.AnnotationShadowOf, policyhubv1.ShadowOfValue("ClusterPolicy", "", live), policyhubv1.AnnotationContentHash, contentHash, deploymentsMatch(ns, 2)))
	for _, p := range []*unstructured.Unstructured{livePolicy, shadowPolicy} {
		apply(ctx, t, c1, p)
		t.Cleanup(func() { _ = c1.Delete(context.Background(), p) })
	}

	want := policyhubv1.ShadowResults{
		Name: shadow, Kind: "ValidatingPolicy", Of: "ClusterPolicy/" + live, ContentHash: contentHash,
		Resources: 3, WouldFail: 2, NewlyFailing: 1, Same: 2, Differ: 1,
		FirstNewlyFailing: []policyhubv1.ResourceRef{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "team-only"}},
		FirstDiffering: []policyhubv1.VerdictDifference{{
			Resource: policyhubv1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "team-only"},
			Shadow:   policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass,
		}},
	}
	var kyverno *agentShadowReports
	eventually(t, 3*time.Minute, time.Second, "the summary's shadow entry, as Kyverno's reports say", func() error {
		var err error
		kyverno, err = readAgentShadowReports(ctx, c1, ns, live, shadow)
		if err != nil {
			return err
		}
		return checkAgentShadowSummary(t, ns, live, want, kyverno)
	})
	t.Logf("the shadow's entry matched Kyverno's reports %s after the policies were applied; the reports: %s", time.Since(start).Round(time.Second), kyverno)

	// Its counts change: the team-only Deployment gets a tier, the shadow passes it too.
	deploy := shopDeployment(ns, "team-only", "shop")
	if err := c1.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
		t.Fatal(err)
	}
	deploy.Labels["tier"] = "api"
	if err := c1.Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	want.WouldFail, want.NewlyFailing, want.Same, want.Differ = 1, 0, 3, 0
	want.FirstNewlyFailing, want.FirstDiffering = nil, nil
	eventually(t, 3*time.Minute, time.Second, "the shadow's new counts pushed", func() error {
		var err error
		if kyverno, err = readAgentShadowReports(ctx, c1, ns, live, shadow); err != nil {
			return err
		}
		return checkAgentShadowSummary(t, ns, live, want, kyverno)
	})
	t.Logf("the shadow's new counts were in the summary %s after the update", time.Since(start).Round(time.Second))

	// The shadow goes: so does its entry, and the live policy's counts stay.
	if err := c1.Delete(ctx, shadowPolicy); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, 3*time.Minute, time.Second, "the shadow's entry gone from the summary", func() error {
		s, err := hubSummaryOf(t, "cluster-1")
		if err != nil {
			return err
		}
		for _, e := range s.Spec.Shadows {
			if e.Name == shadow {
				return fmt.Errorf("still there: %+v", e)
			}
		}
		kyverno, err := readAgentShadowReports(ctx, c1, ns, live, shadow)
		if err != nil {
			return err
		}
		if len(kyverno.shadow) > 0 {
			return fmt.Errorf("Kyverno's reports still have the shadow's results: %s", kyverno)
		}
		if p := agentShadowPolicyEntry(s.Spec.Policies, live); p == nil || p.Results != kyverno.liveResults || p.Results.Pass != 2 || p.Results.Fail != 1 {
			return fmt.Errorf("the live policy's entry %+v, want 2 pass and 1 fail as Kyverno's reports say: %+v", p, kyverno.liveResults)
		}
		return nil
	})
	t.Logf("the shadow's entry left the summary %s after the shadow was deleted", time.Since(start).Round(time.Second))
}

// agentShadowReports is what Kyverno's PolicyReports of a namespace say about a live policy and its
// shadow: each one's verdict per Deployment, the live policy's results, and every result of a
// policy other than the shadow (what the namespace's summary entry must hold).
type agentShadowReports struct {
	shadow, live map[string]policyhubv1.Verdict // by Deployment name
	liveResults  policyhubv1.ResultCounts
	nonShadow    policyhubv1.ResultCounts
	// seen lists every report's resource and the policies with results about it (for the log).
	seen []string
}

func (r *agentShadowReports) String() string { return strings.Join(r.seen, "; ") }

// readAgentShadowReports reads the wgpolicyk8s.io PolicyReports of ns (cluster-1's reports
// controller writes those) and folds them as Kyverno gives them.
func readAgentShadowReports(ctx context.Context, c client.Client, ns, live, shadow string) (*agentShadowReports, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReportList"})
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := &agentShadowReports{shadow: map[string]policyhubv1.Verdict{}, live: map[string]policyhubv1.Verdict{}}
	for _, report := range list.Items {
		kind, _, _ := unstructured.NestedString(report.Object, "scope", "kind")
		name, _, _ := unstructured.NestedString(report.Object, "scope", "name")
		results, _, _ := unstructured.NestedSlice(report.Object, "results")
		byPolicy := map[string]*policyhubv1.ResultCounts{}
		var policies []string
		for _, r := range results {
			m, _ := r.(map[string]any)
			policy, _ := m["policy"].(string)
			result, _ := m["result"].(string)
			if byPolicy[policy] == nil {
				byPolicy[policy] = &policyhubv1.ResultCounts{}
				policies = append(policies, fmt.Sprintf("%s (%v)", policy, m["source"]))
			}
			addAgentShadowResult(byPolicy[policy], result)
			if policy != shadow {
				addAgentShadowResult(&out.nonShadow, result)
			}
			if policy == live {
				addAgentShadowResult(&out.liveResults, result)
			}
		}
		slices.Sort(policies)
		out.seen = append(out.seen, fmt.Sprintf("%s %s: %s", kind, name, strings.Join(policies, ", ")))
		if kind != "Deployment" {
			continue
		}
		if c := byPolicy[shadow]; c != nil {
			out.shadow[name] = agentShadowVerdict(*c)
		}
		if c := byPolicy[live]; c != nil {
			out.live[name] = agentShadowVerdict(*c)
		}
	}
	slices.Sort(out.seen)
	return out, nil
}

func addAgentShadowResult(c *policyhubv1.ResultCounts, result string) {
	switch result {
	case "pass":
		c.Pass++
	case "fail":
		c.Fail++
	case "warn":
		c.Warn++
	case "error":
		c.Error++
	case "skip":
		c.Skip++
	}
}

func agentShadowVerdict(c policyhubv1.ResultCounts) policyhubv1.Verdict {
	switch {
	case c.Fail+c.Error > 0:
		return policyhubv1.VerdictFail
	case c.Pass+c.Warn > 0:
		return policyhubv1.VerdictPass
	case c.Skip > 0:
		return policyhubv1.VerdictSkip
	}
	return policyhubv1.VerdictNone
}

// counts are the shadow entry's counts as Kyverno's reports give them.
func (r *agentShadowReports) counts() (resources, wouldFail, newlyFailing, same, differ, onlyShadow, onlyLive int64) {
	none := policyhubv1.VerdictNone
	for _, name := range []string{"both", "team-only", "neither"} {
		s, l := agentShadowOrNone(r.shadow[name]), agentShadowOrNone(r.live[name])
		switch {
		case s != none && l != none && s == l:
			same++
		case s != none && l != none:
			differ++
		case s != none:
			onlyShadow++
		case l != none:
			onlyLive++
		}
		if s != none {
			resources++
		}
		if s == policyhubv1.VerdictFail {
			wouldFail++
			if l != policyhubv1.VerdictFail {
				newlyFailing++
			}
		}
	}
	return
}

func agentShadowOrNone(v policyhubv1.Verdict) policyhubv1.Verdict {
	if v == "" {
		return policyhubv1.VerdictNone
	}
	return v
}

// checkAgentShadowSummary compares cluster-1's summary with want and with Kyverno's reports: the
// shadow's entry, and its results in no policy, application, violation or namespace entry, nor
// in the totals.
func checkAgentShadowSummary(t *testing.T, ns, live string, want policyhubv1.ShadowResults, kyverno *agentShadowReports) error {
	t.Helper()
	resources, wouldFail, newlyFailing, same, differ, onlyShadow, onlyLive := kyverno.counts()
	fromReports := [7]int64{resources, wouldFail, newlyFailing, same, differ, onlyShadow, onlyLive}
	if wantCounts := [7]int64{want.Resources, want.WouldFail, want.NewlyFailing, want.Same, want.Differ, want.OnlyShadow, want.OnlyLive}; fromReports != wantCounts {
		return fmt.Errorf("Kyverno's reports say %v (resources, wouldFail, newlyFailing, same, differ, onlyShadow, onlyLive), want %v: %s", fromReports, wantCounts, kyverno)
	}
	s, err := hubSummaryOf(t, "cluster-1")
	if err != nil {
		return err
	}
	spec := s.Spec
	var got *policyhubv1.ShadowResults
	for i := range spec.Shadows {
		if spec.Shadows[i].Name == want.Name {
			got = &spec.Shadows[i]
		}
	}
	if got == nil {
		return fmt.Errorf("no entry for %s in spec.shadows %+v", want.Name, spec.Shadows)
	}
	if !reflect.DeepEqual(*got, want) {
		return fmt.Errorf("shadow entry\n%+v\nwant\n%+v", *got, want)
	}
	if err := spec.Validate(); err != nil {
		t.Fatalf("the agent's summary breaks the API's rules: %v", err)
	}
	// The shadow's results are compliance nowhere.
	if p := agentShadowPolicyEntry(spec.Policies, want.Name); p != nil {
		t.Fatalf("the shadow is in spec.policies: %+v", p)
	}
	for _, a := range spec.Applications {
		if a.Policy == want.Name {
			t.Fatalf("the shadow is in spec.applications: %+v", a)
		}
	}
	for _, v := range spec.Violations {
		if v.Policy == want.Name {
			t.Fatalf("the shadow is in spec.violations: %+v", v)
		}
	}
	p := agentShadowPolicyEntry(spec.Policies, live)
	if p == nil || p.Kind != "ClusterPolicy" || p.Results != kyverno.liveResults {
		return fmt.Errorf("the live policy's entry %+v, want its results in Kyverno's reports %+v", p, kyverno.liveResults)
	}
	app := false
	for _, a := range spec.Applications {
		if a.Namespace == ns && a.Name == "shop" && a.Policy == live {
			app = a.Results == kyverno.liveResults
		}
	}
	if !app {
		return fmt.Errorf("application shop's entry for %s in %s does not hold the live policy's results %+v", live, ns, kyverno.liveResults)
	}
	// The totals are the policies' results, every one of them: the shadow's are not among them.
	// (Other tests' policies share cluster-1 and its totals.)
	var sum policyhubv1.ResultCounts
	for _, e := range spec.Policies {
		sum.Pass += e.Results.Pass
		sum.Fail += e.Results.Fail
		sum.Warn += e.Results.Warn
		sum.Error += e.Results.Error
		sum.Skip += e.Results.Skip
	}
	if spec.Truncated != nil && spec.Truncated.Policies > 0 {
		t.Fatalf("cluster-1's summary cut %d policies: the totals cannot be checked", spec.Truncated.Policies)
	}
	if spec.Totals != sum {
		return fmt.Errorf("totals %+v, the policies' results add up to %+v", spec.Totals, sum)
	}
	var nsEntry *policyhubv1.NamespaceSummary
	for i := range spec.Namespaces {
		if spec.Namespaces[i].Namespace == ns {
			nsEntry = &spec.Namespaces[i]
		}
	}
	if nsEntry == nil || nsEntry.Results != kyverno.nonShadow {
		return fmt.Errorf("namespace %s's entry %+v, want the results of its reports but the shadow's, %+v", ns, nsEntry, kyverno.nonShadow)
	}
	return nil
}

func agentShadowPolicyEntry(policies []policyhubv1.PolicySummary, name string) *policyhubv1.PolicySummary {
	for i := range policies {
		if policies[i].Name == name {
			return &policies[i]
		}
	}
	return nil
}
