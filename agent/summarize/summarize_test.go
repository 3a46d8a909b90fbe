package summarize

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policyhub/policyhub/agent/collect"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var (
	requireLabels  = collect.PolicyKey{Kind: "ClusterPolicy", Name: "require-labels"}
	disallowLatest = collect.PolicyKey{Kind: "ClusterPolicy", Name: "disallow-latest"}
)

func pod(namespace, name string) collect.Resource {
	return collect.Resource{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name)}
}

func ref(r collect.Resource) policyhubv1.ResourceRef {
	return policyhubv1.ResourceRef{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

func counts(k collect.PolicyKey, c collect.Counts) collect.PolicyCounts {
	return collect.NewPolicyCounts(k, "", "", c)
}

func at(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestSummarize(t *testing.T) {
	podA1, podA2, podB1 := pod("a", "pod-1"), pod("a", "pod-2"), pod("b", "pod-1")
	apps := map[types.UID]string{podA1.UID: "shop", podA2.UID: "shop"}

	tests := []struct {
		name string
		in   collect.Snapshot
		opts Options
		want policyhubv1.PolicyReportSummarySpec // ContentHash is filled in by the test
	}{
		{
			name: "empty snapshot: cluster and engine only",
			in: collect.Snapshot{Engine: policyhubv1.EngineInfo{
				ReportAPIs: []string{"wgpolicyk8s.io/v1alpha2", "openreports.io/v1alpha1"}, KyvernoWebhooks: true,
			}},
			want: policyhubv1.PolicyReportSummarySpec{Engine: policyhubv1.EngineInfo{
				ReportAPIs: []string{"openreports.io/v1alpha1", "wgpolicyk8s.io/v1alpha2"}, KyvernoWebhooks: true,
			}},
		},
		{
			name: "counts sum into totals, policies and applications; no application, no entry",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Resource: podA1, Policies: []collect.PolicyCounts{
						counts(requireLabels, collect.Counts{Pass: 2, Fail: 1}),
						counts(disallowLatest, collect.Counts{Pass: 1}),
					}},
					{Resource: podA2, Policies: []collect.PolicyCounts{
						counts(requireLabels, collect.Counts{Pass: 1, Warn: 1, Error: 1, Skip: 2}),
					}},
					{Resource: podB1, Policies: []collect.PolicyCounts{
						counts(requireLabels, collect.Counts{Fail: 1}),
					}},
					{Policies: []collect.PolicyCounts{ // results about no resource
						counts(requireLabels, collect.Counts{Pass: 5}),
					}},
				},
				Applications: apps,
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Pass: 9, Fail: 2, Warn: 1, Error: 1, Skip: 2},
				Policies: []policyhubv1.PolicySummary{
					{Name: "disallow-latest", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 1}},
					{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 8, Fail: 2, Warn: 1, Error: 1, Skip: 2}},
				},
				Applications: []policyhubv1.ApplicationSummary{
					{Namespace: "a", Name: "shop", Policy: "disallow-latest", Results: policyhubv1.ResultCounts{Pass: 1}},
					{Namespace: "a", Name: "shop", Policy: "require-labels", Results: policyhubv1.ResultCounts{Pass: 3, Fail: 1, Warn: 1, Error: 1, Skip: 2}},
				},
			},
		},
		{
			name: "annotations first, then the results' most frequent value, ties by lexical order",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Resource: podB1, Policies: []collect.PolicyCounts{
						collect.NewPolicyCounts(requireLabels, "medium", "Other", collect.Counts{Pass: 1}),
						collect.NewPolicyCounts(disallowLatest, "low", "", collect.Counts{Pass: 1}),
					}},
					{Resource: podA1, Policies: []collect.PolicyCounts{
						collect.NewPolicyCounts(requireLabels, "medium", "Best Practices", collect.Counts{Pass: 1}),
						collect.NewPolicyCounts(disallowLatest, "high", "", collect.Counts{Pass: 1}),
					}},
					{Resource: podA2, Policies: []collect.PolicyCounts{
						collect.NewPolicyCounts(requireLabels, "", "Best Practices", collect.Counts{Pass: 1}),
					}},
				},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{
					requireLabels: {Title: "Require labels", Severity: "high"},
				},
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Pass: 5},
				Policies: []policyhubv1.PolicySummary{
					{Name: "disallow-latest", Kind: "ClusterPolicy", Severity: "high", Results: policyhubv1.ResultCounts{Pass: 2}},
					{Name: "require-labels", Kind: "ClusterPolicy", Title: "Require labels", Category: "Best Practices", Severity: "high", Results: policyhubv1.ResultCounts{Pass: 3}},
				},
			},
		},
		{
			name: "a title is cut to the API's 256 bytes",
			in: collect.Snapshot{
				Digests:  []*collect.Digest{{Resource: podB1, Policies: []collect.PolicyCounts{counts(requireLabels, collect.Counts{Pass: 1})}}},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{requireLabels: {Title: strings.Repeat("t", 255) + "ü"}},
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Pass: 1},
				Policies: []policyhubv1.PolicySummary{
					{Name: "require-labels", Kind: "ClusterPolicy", Title: strings.Repeat("t", 255), Results: policyhubv1.ResultCounts{Pass: 1}},
				},
			},
		},
		{
			name: "a category and a severity are cut to the API's bounds",
			in: collect.Snapshot{
				Digests: []*collect.Digest{{Resource: podB1, Policies: []collect.PolicyCounts{counts(requireLabels, collect.Counts{Pass: 1})}}},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{requireLabels: {
					Category: strings.Repeat("c", 127) + "ü", Severity: strings.Repeat("s", 100)}},
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Pass: 1},
				Policies: []policyhubv1.PolicySummary{
					{Name: "require-labels", Kind: "ClusterPolicy", Category: strings.Repeat("c", 127), Severity: strings.Repeat("s", 64), Results: policyhubv1.ResultCounts{Pass: 1}},
				},
			},
		},
		{
			// The CRD keys spec.policies by name, namespace and kind and refuses a second entry
			// under one key: a policy reported by both report APIs (one naming its kind, one not)
			// is one entry.
			name: "the same policy in two report APIs is one entry",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Report: "wgpolicyk8s.io/v1alpha2 PolicyReport a/r1", Resource: podA1, Policies: []collect.PolicyCounts{
						counts(collect.PolicyKey{Name: "require-labels"}, collect.Counts{Pass: 1}),
					}},
					{Report: "openreports.io/v1alpha1 Report a/r1", Resource: podA1, Policies: []collect.PolicyCounts{
						counts(requireLabels, collect.Counts{Fail: 1}),
					}},
					{Report: "openreports.io/v1alpha1 Report a/r2", Resource: podA2, Policies: []collect.PolicyCounts{
						counts(requireLabels, collect.Counts{Pass: 1}),
					}},
				},
				Applications: apps,
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Pass: 2, Fail: 1},
				Policies: []policyhubv1.PolicySummary{
					{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 2, Fail: 1}},
				},
				Applications: []policyhubv1.ApplicationSummary{
					{Namespace: "a", Name: "shop", Policy: "require-labels", Results: policyhubv1.ResultCounts{Pass: 2, Fail: 1}},
				},
			},
		},
		{
			name: "blocks: a count of 0 is one, attributed to the application when the resource has one",
			in: collect.Snapshot{
				Blocks: []*collect.Block{
					{Policy: requireLabels, Resource: podA1, Count: 3, Message: "older", Time: t0.Add(time.Second)},
					{Policy: requireLabels, Resource: pod("a", "never-created"), Count: 0, Message: "newest of require-labels", Time: t0.Add(2 * time.Second)},
					{Policy: disallowLatest, Resource: collect.Resource{Kind: "Pod", Namespace: "b", Name: "web-1"}, Count: 2, Message: "newest of disallow-latest", Time: t0.Add(3 * time.Second)},
					{Policy: disallowLatest, Resource: podB1, Count: 1, Message: "older", Time: t0},
				},
				Applications: map[types.UID]string{podA1.UID: "shop", podB1.UID: "web"},
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Blocked: 7,
				Policies: []policyhubv1.PolicySummary{
					{Name: "disallow-latest", Kind: "ClusterPolicy", Blocked: 3, LastBlocked: &policyhubv1.BlockedAdmission{
						Resource: &policyhubv1.ResourceRef{Kind: "Pod", Namespace: "b", Name: "web-1"}, Message: "newest of disallow-latest", Time: at(t0.Add(3 * time.Second))}},
					{Name: "require-labels", Kind: "ClusterPolicy", Blocked: 4, LastBlocked: &policyhubv1.BlockedAdmission{
						Resource: ptr(ref(pod("a", "never-created"))), Message: "newest of require-labels", Time: at(t0.Add(2 * time.Second))}},
				},
				Applications: []policyhubv1.ApplicationSummary{
					{Namespace: "a", Name: "shop", Policy: "require-labels", Blocked: 3},
					{Namespace: "b", Name: "web", Policy: "disallow-latest", Blocked: 1},
				},
			},
		},
		{
			name: "a kindless key takes the kind of the only annotated policy of that name",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Resource: podA1, Policies: []collect.PolicyCounts{
						counts(collect.PolicyKey{Name: "require-labels"}, collect.Counts{Pass: 1}),
						counts(requireLabels, collect.Counts{Fail: 1}),
						counts(collect.PolicyKey{Name: "twin"}, collect.Counts{Pass: 1}), // two kinds: ambiguous
					}},
				},
				Blocks: []*collect.Block{
					{Policy: collect.PolicyKey{Kind: "ValidatingPolicy", Name: "twin"}, Resource: podA1},
				},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{
					requireLabels:                            {Severity: "high"},
					{Kind: "ClusterPolicy", Name: "twin"}:    {Severity: "low"},
					{Kind: "ValidatingPolicy", Name: "twin"}: {Severity: "medium"},
				},
				Applications: apps,
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals:  policyhubv1.ResultCounts{Pass: 2, Fail: 1},
				Blocked: 1,
				Policies: []policyhubv1.PolicySummary{
					{Name: "require-labels", Kind: "ClusterPolicy", Severity: "high", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 1}},
					{Name: "twin", Results: policyhubv1.ResultCounts{Pass: 1}},
					{Name: "twin", Kind: "ValidatingPolicy", Severity: "medium", Blocked: 1, LastBlocked: &policyhubv1.BlockedAdmission{Resource: ptr(ref(podA1))}},
				},
				// The API names a policy by namespace and name there: the two twins share an entry.
				Applications: []policyhubv1.ApplicationSummary{
					{Namespace: "a", Name: "shop", Policy: "require-labels", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 1}},
					{Namespace: "a", Name: "shop", Policy: "twin", Results: policyhubv1.ResultCounts{Pass: 1}, Blocked: 1},
				},
			},
		},
		{
			name: "without annotations, a kindless key takes the only kind seen for that name",
			in: collect.Snapshot{
				Digests: []*collect.Digest{{Resource: podB1, Policies: []collect.PolicyCounts{
					counts(collect.PolicyKey{Name: "require-labels"}, collect.Counts{Fail: 2}),
				}}},
				Blocks: []*collect.Block{{Policy: requireLabels, Resource: podB1, Count: 5}},
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals:  policyhubv1.ResultCounts{Fail: 2},
				Blocked: 5,
				Policies: []policyhubv1.PolicySummary{
					{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 2}, Blocked: 5, LastBlocked: &policyhubv1.BlockedAdmission{Resource: ptr(ref(podB1))}},
				},
			},
		},
		{
			name: "a namespaced policy is namespace/name in applications and violations",
			in: collect.Snapshot{
				Digests: []*collect.Digest{{
					Resource: podA1,
					Policies: []collect.PolicyCounts{
						counts(collect.PolicyKey{Kind: "Policy", Namespace: "a", Name: "limits"}, collect.Counts{Fail: 1}),
					},
					Violations: []collect.Violation{{
						Policy: collect.PolicyKey{Kind: "Policy", Namespace: "a", Name: "limits"},
						Rule:   "cpu", Result: "fail", Severity: "medium", Message: "set cpu limits", Time: t0,
					}},
				}},
				Applications: apps,
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Fail: 1},
				Policies: []policyhubv1.PolicySummary{
					{Name: "limits", Namespace: "a", Kind: "Policy", Severity: "medium", Results: policyhubv1.ResultCounts{Fail: 1}},
				},
				Applications: []policyhubv1.ApplicationSummary{
					{Namespace: "a", Name: "shop", Policy: "a/limits", Results: policyhubv1.ResultCounts{Fail: 1}},
				},
				Violations: []policyhubv1.Violation{
					{Policy: "a/limits", Rule: "cpu", Result: "fail", Severity: "medium", Resource: ref(podA1), Message: "set cpu limits", Timestamp: at(t0)},
				},
			},
		},
		{
			name: "violations: most severe, newest, then resource and rule; messages cut on a character",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Resource: podA2, Violations: []collect.Violation{
						{Policy: requireLabels, Rule: "r1", Result: "fail", Message: "old", Time: t0},
						{Policy: requireLabels, Rule: "r0", Result: "fail", Message: "old", Time: t0},
						{Policy: collect.PolicyKey{Name: "unrated"}, Rule: "r", Result: "fail", Time: t0.Add(3 * time.Hour)},
						{Policy: requireLabels, Rule: "r0", Result: "pass", Time: t0.Add(9 * time.Hour)}, // not a violation
					}},
					{Resource: podA1, Violations: []collect.Violation{
						{Policy: requireLabels, Rule: "r1", Result: "fail", Message: strings.Repeat("x", 511) + "é and more", Time: t0.Add(time.Hour)},
						{Policy: requireLabels, Rule: "r1", Result: "fail", Message: "old", Time: t0},
						{Policy: disallowLatest, Rule: "tag", Result: "fail", Severity: "low", Time: t0.Add(2 * time.Hour)},
						{Policy: collect.PolicyKey{Name: "crit"}, Rule: "r", Result: "Error", Severity: "Critical", Message: strings.Repeat("x", 510) + "日本", Time: t0.Add(-time.Hour)},
					}},
				},
				Policies: map[collect.PolicyKey]collect.PolicyInfo{requireLabels: {Severity: "high"}},
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Policies: []policyhubv1.PolicySummary{
					{Name: "crit", Severity: "Critical"},
					{Name: "disallow-latest", Kind: "ClusterPolicy", Severity: "low"},
					{Name: "require-labels", Kind: "ClusterPolicy", Severity: "high"},
					{Name: "unrated"},
				},
				Violations: []policyhubv1.Violation{
					{Policy: "crit", Rule: "r", Result: "error", Severity: "Critical", Resource: ref(podA1), Message: strings.Repeat("x", 510), Timestamp: at(t0.Add(-time.Hour))},
					{Policy: "require-labels", Rule: "r1", Result: "fail", Severity: "high", Resource: ref(podA1), Message: strings.Repeat("x", 511), Timestamp: at(t0.Add(time.Hour))},
					{Policy: "require-labels", Rule: "r1", Result: "fail", Severity: "high", Resource: ref(podA1), Message: "old", Timestamp: at(t0)},
					{Policy: "require-labels", Rule: "r0", Result: "fail", Severity: "high", Resource: ref(podA2), Message: "old", Timestamp: at(t0)},
					{Policy: "require-labels", Rule: "r1", Result: "fail", Severity: "high", Resource: ref(podA2), Message: "old", Timestamp: at(t0)},
					{Policy: "disallow-latest", Rule: "tag", Result: "fail", Severity: "low", Resource: ref(podA1), Timestamp: at(t0.Add(2 * time.Hour))},
					{Policy: "unrated", Rule: "r", Result: "fail", Resource: ref(podA2), Timestamp: at(t0.Add(3 * time.Hour))},
				},
			},
		},
		{
			name: "MaxViolations keeps the top ones and counts the rest",
			in: collect.Snapshot{Digests: []*collect.Digest{{Resource: podA1, Violations: []collect.Violation{
				{Policy: requireLabels, Result: "fail", Severity: "low", Time: t0.Add(time.Hour)},
				{Policy: requireLabels, Result: "fail", Severity: "low", Time: t0},
				{Policy: requireLabels, Result: "fail", Severity: "high", Time: t0},
				{Policy: requireLabels, Result: "error", Time: t0.Add(time.Hour)},
				{Policy: requireLabels, Result: "skip", Severity: "critical", Time: t0.Add(time.Hour)},
			}}}},
			opts: Options{MaxViolations: 2},
			want: policyhubv1.PolicyReportSummarySpec{
				Policies: []policyhubv1.PolicySummary{{Name: "require-labels", Kind: "ClusterPolicy", Severity: "low"}},
				Violations: []policyhubv1.Violation{
					{Policy: "require-labels", Result: "fail", Severity: "high", Resource: ref(podA1), Timestamp: at(t0)},
					// No severity of its own: the policy's (its results say low most often); error before fail.
					{Policy: "require-labels", Result: "error", Severity: "low", Resource: ref(podA1), Timestamp: at(t0.Add(time.Hour))},
				},
				Truncated: &policyhubv1.Truncation{Violations: 2},
			},
		},
		{
			name: "MaxPolicies and MaxApplications keep the most failing, then the most results",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Resource: podA1, Policies: []collect.PolicyCounts{
						counts(collect.PolicyKey{Name: "p1"}, collect.Counts{Pass: 9}),
						counts(collect.PolicyKey{Name: "p2"}, collect.Counts{Fail: 1, Pass: 1}),
						counts(collect.PolicyKey{Name: "p3"}, collect.Counts{Error: 1}),
					}},
					{Resource: podB1, Policies: []collect.PolicyCounts{
						counts(collect.PolicyKey{Name: "p1"}, collect.Counts{Fail: 1}),
					}},
				},
				Applications: map[types.UID]string{podA1.UID: "shop", podB1.UID: "web"},
			},
			opts: Options{MaxPolicies: 2, MaxApplications: 2},
			want: policyhubv1.PolicyReportSummarySpec{
				Totals: policyhubv1.ResultCounts{Pass: 10, Fail: 2, Error: 1},
				Policies: []policyhubv1.PolicySummary{
					{Name: "p1", Results: policyhubv1.ResultCounts{Pass: 9, Fail: 1}},
					{Name: "p2", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 1}},
				},
				Applications: []policyhubv1.ApplicationSummary{
					{Namespace: "a", Name: "shop", Policy: "p2", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 1}},
					// Tied with b/web/p1 (one error, one result): the first by key stays.
					{Namespace: "a", Name: "shop", Policy: "p3", Results: policyhubv1.ResultCounts{Error: 1}},
				},
				Truncated: &policyhubv1.Truncation{Policies: 1, Applications: 2},
			},
		},
		{
			name: "exceptions: summed over the cluster, most results first, ties by name",
			in: collect.Snapshot{
				Digests: []*collect.Digest{
					{Resource: podA1, Exceptions: []collect.ExceptionCount{{Name: "fpex-b", Results: 2}, {Name: "fpex-a", Results: 1}}},
					{Resource: podA2, Exceptions: []collect.ExceptionCount{{Name: "fpex-a", Results: 1}, {Name: "fpex-c", Results: 3}}},
					// Not a name, or no result: nothing to say.
					{Resource: podB1, Exceptions: []collect.ExceptionCount{{Name: "fpex-d", Results: 1}, {Name: "", Results: 5}, {Name: "fpex-e"}}},
				},
				Applications: apps,
			},
			want: policyhubv1.PolicyReportSummarySpec{
				Exceptions: []policyhubv1.ExceptionResults{
					{Name: "fpex-c", Results: 3}, {Name: "fpex-a", Results: 2}, {Name: "fpex-b", Results: 2}, {Name: "fpex-d", Results: 1},
				},
			},
		},
		{
			name: "MaxExceptions keeps those with the most results and counts the rest",
			in: collect.Snapshot{Digests: []*collect.Digest{
				{Resource: podA1, Exceptions: []collect.ExceptionCount{{Name: "fpex-b", Results: 2}, {Name: "fpex-a", Results: 1}}},
				{Resource: podA2, Exceptions: []collect.ExceptionCount{{Name: "fpex-a", Results: 1}, {Name: "fpex-c", Results: 3}, {Name: "fpex-d", Results: 1}}},
			}},
			opts: Options{MaxExceptions: 2},
			want: policyhubv1.PolicyReportSummarySpec{
				Exceptions: []policyhubv1.ExceptionResults{{Name: "fpex-c", Results: 3}, {Name: "fpex-a", Results: 2}},
				Truncated:  &policyhubv1.Truncation{Exceptions: 2},
			},
		},
		{
			name: "an exception name is cut to the API's 253 bytes, and names equal once cut are one",
			in: collect.Snapshot{Digests: []*collect.Digest{
				{Resource: podA1, Exceptions: []collect.ExceptionCount{{Name: strings.Repeat("e", 260), Results: 1}}},
				{Resource: podA2, Exceptions: []collect.ExceptionCount{{Name: strings.Repeat("e", 253), Results: 2}}},
			}},
			want: policyhubv1.PolicyReportSummarySpec{
				Exceptions: []policyhubv1.ExceptionResults{{Name: strings.Repeat("e", 253), Results: 3}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Cluster = "east-1"
			tt.want.Cluster = "east-1"
			tt.want.Namespaces = namespacesOf(tt.in)
			tt.want.ContentHash = Hash(tt.want)
			got := Summarize(tt.in, tt.opts)
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
			// What the agent pushes, the hub's CRD admits: no key twice, every string in bounds.
			if err := got.Validate(); err != nil {
				t.Errorf("the summary breaks the API's rules: %v", err)
			}
		})
	}
}

// namespacesOf is what spec.namespaces must hold for a snapshot with few namespaces, summed the
// plain way: TestSummarize's cases state the rest of each summary, and this part follows from
// their resources (TestSummarizeNamespaces states it for its own case).
func namespacesOf(s collect.Snapshot) []policyhubv1.NamespaceSummary {
	byName := map[string]*policyhubv1.NamespaceSummary{}
	get := func(ns string) *policyhubv1.NamespaceSummary {
		if byName[ns] == nil {
			byName[ns] = &policyhubv1.NamespaceSummary{Namespace: ns}
		}
		return byName[ns]
	}
	for _, d := range s.Digests {
		if d.Resource.Namespace == "" {
			continue
		}
		n := get(d.Resource.Namespace)
		for _, pc := range d.Policies {
			n.Results.Pass += int64(pc.Counts.Pass)
			n.Results.Fail += int64(pc.Counts.Fail)
			n.Results.Warn += int64(pc.Counts.Warn)
			n.Results.Error += int64(pc.Counts.Error)
			n.Results.Skip += int64(pc.Counts.Skip)
		}
	}
	for _, b := range s.Blocks {
		if b != nil && b.Resource.Namespace != "" {
			get(b.Resource.Namespace).Blocked += int64(max(b.Count, 1))
		}
	}
	var out []policyhubv1.NamespaceSummary
	for _, ns := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[ns])
	}
	return out
}

func TestOptionsDefaults(t *testing.T) {
	tests := []struct {
		in, want Options
	}{
		{Options{}, Options{MaxViolations: 50, MaxPolicies: 1000, MaxApplications: 2000, MaxExceptions: 200, MaxNamespaces: 1000, MaxBytes: 512 * 1024}},
		{Options{MaxViolations: 500, MaxPolicies: 5000, MaxApplications: 9000, MaxExceptions: 900, MaxNamespaces: 5000, MaxBytes: 2 << 20},
			Options{MaxViolations: 200, MaxPolicies: 1000, MaxApplications: 2000, MaxExceptions: 200, MaxNamespaces: 1000, MaxBytes: 2 << 20}},
		{Options{MaxViolations: 7, MaxPolicies: 8, MaxApplications: 9, MaxExceptions: 3, MaxNamespaces: 4, MaxBytes: 10},
			Options{MaxViolations: 7, MaxPolicies: 8, MaxApplications: 9, MaxExceptions: 3, MaxNamespaces: 4, MaxBytes: 10}},
	}
	for _, tt := range tests {
		if got := tt.in.withDefaults(); got != tt.want {
			t.Errorf("%+v.withDefaults() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestHash(t *testing.T) {
	base := Summarize(randomSnapshot(1, 200), Options{Cluster: "east-1"})
	h := Hash(base)
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Fatalf("Hash = %q, want 64 hex digits", h)
	}
	if base.ContentHash != h {
		t.Errorf("ContentHash %q != Hash %q", base.ContentHash, h)
	}

	withTime := base
	withTime.GeneratedAt = at(t0)
	withTime.ContentHash = "stale"
	withTime.HeartbeatInterval = &metav1.Duration{Duration: time.Minute}
	if got := Hash(withTime); got != h {
		t.Errorf("Hash changed with GeneratedAt, HeartbeatInterval and ContentHash: %s != %s", got, h)
	}

	changed := base
	changed.Policies = append([]policyhubv1.PolicySummary(nil), base.Policies...)
	changed.Policies[0].Results.Fail++
	if Hash(changed) == h {
		t.Error("Hash unchanged when a policy's fail count changed")
	}
	changed = base
	changed.Totals.Pass++
	if Hash(changed) == h {
		t.Error("Hash unchanged when the totals changed")
	}
	changed = base
	if len(base.Exceptions) == 0 {
		t.Fatal("the random snapshot has no exceptions")
	}
	changed.Exceptions = append([]policyhubv1.ExceptionResults(nil), base.Exceptions...)
	changed.Exceptions[0].Results++
	if Hash(changed) == h {
		t.Error("Hash unchanged when an exception's results changed")
	}
}

func ptr[T any](v T) *T { return &v }

// A policy's oldest result is the oldest over every report: a rollout reads it to tell whether
// Kyverno evaluated every resource again since the policy changed.
func TestSummarizeOldestResult(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	pc := func(oldest time.Time) collect.PolicyCounts {
		c := counts(disallowLatest, collect.Counts{Pass: 1})
		c.Saw(oldest)
		return c
	}
	got := Summarize(collect.Snapshot{Digests: []*collect.Digest{
		{Report: "r1", Resource: pod("a", "pod-1"), Policies: []collect.PolicyCounts{pc(t0.Add(time.Minute))}},
		{Report: "r2", Resource: pod("a", "pod-2"), Policies: []collect.PolicyCounts{pc(t0)}},
		{Report: "r3", Resource: pod("b", "pod-1"), Policies: []collect.PolicyCounts{pc(time.Time{})}}, // a result without a time
	}}, Options{Cluster: "east-1"})
	if len(got.Policies) != 1 || got.Policies[0].OldestResult == nil || !got.Policies[0].OldestResult.Time.Equal(t0) {
		t.Fatalf("policies %+v, want one whose oldest result is %v", got.Policies, t0)
	}
	none := Summarize(collect.Snapshot{Digests: []*collect.Digest{{Report: "r", Resource: pod("a", "p"), Policies: []collect.PolicyCounts{pc(time.Time{})}}}}, Options{Cluster: "east-1"})
	if none.Policies[0].OldestResult != nil {
		t.Errorf("no result has a time: oldest %v, want none", none.Policies[0].OldestResult)
	}
}

// The top 200 exceptions by results are kept, in the API's order, whatever the order of the
// digests; the rest are counted.
func TestSummarizeExceptionsTopN(t *testing.T) {
	const n = policyhubv1.MaxSummaryExceptions + 50
	var s collect.Snapshot
	for i := range n {
		// Exception i has i/2 + 1 results: pairs of ties, broken by name.
		d := &collect.Digest{Resource: pod("a", fmt.Sprintf("pod-%d", i))}
		for range i/2 + 1 {
			d.Exceptions = append(d.Exceptions, collect.ExceptionCount{Name: fmt.Sprintf("fpex-%03d", i), Results: 1})
		}
		s.Digests = append(s.Digests, d)
	}
	got := Summarize(s, Options{Cluster: "east-1"})
	if err := got.Validate(); err != nil {
		t.Fatalf("the summary breaks the API's rules: %v", err)
	}
	if len(got.Exceptions) != policyhubv1.MaxSummaryExceptions || got.Truncated == nil || got.Truncated.Exceptions != 50 {
		t.Fatalf("kept %d exceptions, truncated %+v; want 200 kept and 50 cut", len(got.Exceptions), got.Truncated)
	}
	for i, e := range got.Exceptions {
		// Most results first (248 and 249 have 125 each), ties by name: 248, 249, 246, 247, …
		want := n - 2 - 2*(i/2) + i%2
		if wantName := fmt.Sprintf("fpex-%03d", want); e.Name != wantName || e.Results != int64(want/2+1) {
			t.Fatalf("exceptions[%d] = %+v, want %s with %d results", i, e, wantName, want/2+1)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 5 {
		again := Summarize(shuffled(s, r), Options{Cluster: "east-1"})
		if again.ContentHash != got.ContentHash || mustJSON(t, again) != mustJSON(t, got) {
			t.Fatal("the same exceptions in another order give another summary")
		}
	}
}

// Each namespace's resources are counted together, every policy and refusal; cluster-scoped
// resources in no namespace; when there are more namespaces than kept, those with the most
// violations stay and the rest are counted as cut.
func TestSummarizeNamespaces(t *testing.T) {
	var s collect.Snapshot
	s.Digests = []*collect.Digest{
		{Resource: pod("shop", "web"), Policies: []collect.PolicyCounts{counts(requireLabels, collect.Counts{Fail: 1}), counts(disallowLatest, collect.Counts{Pass: 1})}},
		{Resource: pod("shop", "db"), Policies: []collect.PolicyCounts{counts(requireLabels, collect.Counts{Fail: 1, Error: 1})}},
		{Resource: pod("blog", "web"), Policies: []collect.PolicyCounts{counts(requireLabels, collect.Counts{Pass: 2, Skip: 1})}},
		{Resource: collect.Resource{APIVersion: "v1", Kind: "Namespace", Name: "shop"}, Policies: []collect.PolicyCounts{counts(requireLabels, collect.Counts{Fail: 5})}},
	}
	s.Blocks = []*collect.Block{{Policy: disallowLatest, Resource: pod("quiet", "x"), Message: "refused", Time: t0, Count: 3}}
	got := Summarize(s, Options{Cluster: "east-1"})
	want := []policyhubv1.NamespaceSummary{
		{Namespace: "blog", Results: policyhubv1.ResultCounts{Pass: 2, Skip: 1}},
		{Namespace: "quiet", Blocked: 3},
		{Namespace: "shop", Results: policyhubv1.ResultCounts{Pass: 1, Fail: 2, Error: 1}},
	}
	if mustJSON(t, got.Namespaces) != mustJSON(t, want) {
		t.Errorf("namespaces:\n%s\nwant\n%s", mustJSON(t, got.Namespaces), mustJSON(t, want))
	}
	cut := Summarize(s, Options{Cluster: "east-1", MaxNamespaces: 1})
	if len(cut.Namespaces) != 1 || cut.Namespaces[0].Namespace != "shop" || cut.Truncated == nil || cut.Truncated.Namespaces != 2 {
		t.Errorf("one namespace kept: %+v, truncated %+v; want shop (the most violations) and 2 cut", cut.Namespaces, cut.Truncated)
	}
	if err := cut.Validate(); err != nil {
		t.Errorf("the summary breaks the API's rules: %v", err)
	}
}
