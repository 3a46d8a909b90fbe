package aggregate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestForPolicies(t *testing.T) {
	generated := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	summary := &policyhubv1.PolicyReportSummarySpec{
		Cluster:     "cluster-1",
		GeneratedAt: &metav1.Time{Time: generated},
		Policies: []policyhubv1.PolicySummary{
			{Name: "require-labels", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Pass: 3, Fail: 2}, Blocked: 1, OldestResult: &metav1.Time{Time: generated.Add(-time.Minute)}},
			{Name: "require-labels", Namespace: "shop", Kind: "Policy", Results: policyhubv1.ResultCounts{Fail: 7}},
			{Name: "no-latest", Results: policyhubv1.ResultCounts{Warn: 4, Error: 1}, OldestResult: &metav1.Time{Time: generated.Add(-time.Hour)}}, // the report did not say the kind
			{Name: "other", Kind: "ClusterPolicy", Results: policyhubv1.ResultCounts{Fail: 100}},
		},
	}
	for _, tc := range []struct {
		name         string
		policies     []Policy
		now          time.Time
		wantCounts   policyhubv1.ResultCounts
		wantBlocked  int64
		wantStale    bool
		wantOldest   time.Time
		wantUnlisted int
	}{
		{
			name:       "cluster-scoped policy, not the same-named namespaced one",
			policies:   []Policy{{Kind: "ClusterPolicy", Name: "require-labels"}},
			now:        generated.Add(time.Minute),
			wantCounts: policyhubv1.ResultCounts{Pass: 3, Fail: 2}, wantBlocked: 1, wantOldest: generated.Add(-time.Minute),
		},
		{
			name:       "namespaced policy",
			policies:   []Policy{{Kind: "Policy", Namespace: "shop", Name: "require-labels"}},
			now:        generated,
			wantCounts: policyhubv1.ResultCounts{Fail: 7},
		},
		{
			name:       "an entry without kind matches by name",
			policies:   []Policy{{Kind: "ValidatingPolicy", Name: "no-latest"}},
			now:        generated,
			wantCounts: policyhubv1.ResultCounts{Warn: 4, Error: 1}, wantOldest: generated.Add(-time.Hour),
		},
		{
			name:       "several policies add up",
			policies:   []Policy{{Kind: "ClusterPolicy", Name: "require-labels"}, {Kind: "ValidatingPolicy", Name: "no-latest"}},
			now:        generated,
			wantCounts: policyhubv1.ResultCounts{Pass: 3, Fail: 2, Warn: 4, Error: 1}, wantBlocked: 1, wantOldest: generated.Add(-time.Hour),
		},
		{
			name:     "a kind mismatch does not match: the policy is unlisted",
			policies: []Policy{{Kind: "ValidatingPolicy", Name: "other"}},
			now:      generated, wantUnlisted: 1,
		},
		{
			name:       "three missed heartbeats (default 1m) make it stale",
			policies:   []Policy{{Kind: "Policy", Namespace: "shop", Name: "require-labels"}},
			now:        generated.Add(3 * time.Minute),
			wantCounts: policyhubv1.ResultCounts{Fail: 7}, wantStale: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ForPolicies(summary, tc.policies, tc.now)
			if got.Counts != tc.wantCounts || got.Blocked != tc.wantBlocked || got.Stale != tc.wantStale {
				t.Errorf("got counts %+v blocked %d stale %v, want %+v %d %v", got.Counts, got.Blocked, got.Stale, tc.wantCounts, tc.wantBlocked, tc.wantStale)
			}
			if !got.OldestResult.Equal(tc.wantOldest) || got.Unlisted != tc.wantUnlisted {
				t.Errorf("oldest result %v, unlisted %d; want %v, %d", got.OldestResult, got.Unlisted, tc.wantOldest, tc.wantUnlisted)
			}
			if !got.ReportTime.Time.Equal(generated) {
				t.Errorf("report time %v, want %v", got.ReportTime, generated)
			}
		})
	}
}

func TestStaleness(t *testing.T) {
	generated := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s := &policyhubv1.PolicyReportSummarySpec{GeneratedAt: &metav1.Time{Time: generated}, HeartbeatInterval: &metav1.Duration{Duration: 10 * time.Second}}
	if Stale(s, generated.Add(29*time.Second)) {
		t.Error("stale before three heartbeats")
	}
	if !Stale(s, generated.Add(30*time.Second)) {
		t.Error("not stale after three heartbeats")
	}
	if got := Age(s, generated.Add(42*time.Second)); got != 42*time.Second {
		t.Errorf("age %v, want 42s", got)
	}
	if !Stale(&policyhubv1.PolicyReportSummarySpec{}, generated) {
		t.Error("a summary that never said when it was generated is not trustworthy")
	}
}
