package v1alpha1

import (
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPolicyRef(t *testing.T) {
	if got := PolicyRef("", "require-labels"); got != "require-labels" {
		t.Errorf("cluster-scoped: %q", got)
	}
	if got := PolicyRef("shop", "limits"); got != "shop/limits" {
		t.Errorf("namespaced: %q", got)
	}
}

// Severities sort most severe first, whatever their case; unknown and missing ones last.
func TestSeverityRank(t *testing.T) {
	got := []string{"low", "", "CRITICAL", "bogus", "info", "High", "medium"}
	sort.SliceStable(got, func(i, j int) bool { return SeverityRank(got[i]) < SeverityRank(got[j]) })
	if want := "CRITICAL,High,medium,low,info,,bogus"; strings.Join(got, ",") != want {
		t.Errorf("sorted %q, want %q", strings.Join(got, ","), want)
	}
}

// The hub aggregates only the summary named SummaryName, written for its namespace's cluster;
// the refusal names both clusters.
func TestSummaryAccepted(t *testing.T) {
	summary := func(namespace, name, cluster string) *PolicyReportSummary {
		return &PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: PolicyReportSummarySpec{Cluster: cluster}}
	}
	if err := summary("cluster-1", SummaryName, "cluster-1").Accepted(); err != nil {
		t.Errorf("the cluster's own summary refused: %v", err)
	}
	if err := summary("cluster-1", "other", "cluster-1").Accepted(); err == nil || !strings.Contains(err.Error(), `"other" is not aggregated`) {
		t.Errorf("another name: %v", err)
	}
	err := summary("cluster-1", SummaryName, "cluster-2").Accepted()
	if err == nil || !strings.Contains(err.Error(), `"cluster-2"`) || !strings.Contains(err.Error(), `"cluster-1"`) {
		t.Errorf("another cluster not refused with both names: %v", err)
	}
}

// A DNS-1123 label is kept; anything else is cleaned, cut and marked with a hash of the whole, so
// names that clean or cut alike stay apart.
func TestGeneratedName(t *testing.T) {
	long := strings.Repeat("a", 60) + "-deployment-web"
	tests := []struct{ full, want string }{
		{"shop-limits", "shop-limits"},
		{strings.Repeat("a", 63), strings.Repeat("a", 63)},
		// Cleaned: lowercased, other characters '-', trimmed; then '-' and 10 hex of sha256(full).
		{"Shop.Limits-deployment-Web_Front", "shop-limits-deployment-web-front-f3c1fa5d5b"},
		{"shop-limits-deployment-web.", "shop-limits-deployment-web-bd6d3d21e2"},
		{"-shop", "shop-77c19d9e3f"},
		// Cut to 52 characters.
		{long, strings.Repeat("a", 52) + "-59b5606660"},
		{"***", "596f4162a5"},
	}
	for _, tt := range tests {
		if got := GeneratedName(tt.full); got != tt.want {
			t.Errorf("GeneratedName(%q) = %q, want %q", tt.full, got, tt.want)
		}
	}
	if a, b := GeneratedName(long), GeneratedName(strings.Repeat("a", 60)+"-deployment-api"); a == b {
		t.Errorf("two long names cut to the same prefix get the same name %q", a)
	}
	if a, b := GeneratedName("shop.web"), GeneratedName("shop-web"); a == b {
		t.Errorf("a name and its cleaned form get the same name %q", a)
	}
	for _, n := range []string{long, strings.Repeat("x.", 200), "a-" + strings.Repeat("-", 70) + "b", "ünïcode-Näme"} {
		if got := GeneratedName(n); len(validation.IsDNS1123Label(got)) > 0 {
			t.Errorf("GeneratedName(%q) = %q: not a DNS-1123 label", n, got)
		}
	}
}

// An entry's ApplicationPolicy is named by its pair, not by the pair joined with '-': pairs that
// join alike, clean alike or cut alike get different names, each a DNS-1123 label. The pinned
// names are what the KubeVela definition's CUE must give (e2e TestKubeVelaEntryNameIsGeneratedName
// checks it under vela-core).
func TestKubeVelaEntryName(t *testing.T) {
	long := strings.Repeat("a", 60)
	// The hashes are sha256 of "<application>/<entry>" (printf '%s' shop/team | sha256sum).
	pinned := []struct{ application, entry, want string }{
		{"shop", "team", "shop-team-9c9a4f2e2b"},
		{"a-b", "c", "a-b-c-4e84717d75"},
		{"a", "b-c", "a-b-c-b88f83c840"},
		{"Storefront.Checkout", "Require_Limits", "storefront-checkout-require-limits-cfbc580313"},
		{long, "limits", strings.Repeat("a", 52) + "-cba147f1a0"},
	}
	for _, tt := range pinned {
		if got := KubeVelaEntryName(tt.application, tt.entry); got != tt.want {
			t.Errorf("KubeVelaEntryName(%q, %q) = %q, want %q", tt.application, tt.entry, got, tt.want)
		}
	}

	colliding := [][2][2]string{
		// Joined with '-', each pair of pairs is one name.
		{{"a-b", "c"}, {"a", "b-c"}},
		{{"shop-front", "end-limits"}, {"shop", "front-end-limits"}},
		{{"shop", "team"}, {"shop-team", ""}},
		// Cleaned alike.
		{{"shop.web", "limits"}, {"shop-web", "limits"}},
		{{"shop", "Limits"}, {"shop", "limits"}},
		// Cut alike.
		{{long, "limits"}, {long, "team"}},
		// An entry named like another pair's hash, after a cut prefix.
		{{strings.Repeat("a", 52), KubeVelaEntryName(long, "x")[53:]}, {long, "x"}},
	}
	for _, c := range colliding {
		a, b := KubeVelaEntryName(c[0][0], c[0][1]), KubeVelaEntryName(c[1][0], c[1][1])
		if a == b {
			t.Errorf("applications %q and %q: entries %q and %q are both named %q", c[0][0], c[1][0], c[0][1], c[1][1], a)
		}
		for _, name := range []string{a, b} {
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Errorf("%q is not a DNS-1123 label: %v", name, errs)
			}
		}
	}
}

// One ranking of phases: worst first, and the classes status summaries and metrics count.
func TestClusterPhaseRanking(t *testing.T) {
	order := []ClusterPhase{ClusterPhaseFailed, ClusterPhaseConflict, ClusterPhaseUnsupported, ClusterPhaseLockHeld, ClusterPhasePending, ClusterPhaseSynced}
	for i := 1; i < len(order); i++ {
		if order[i-1].ProblemRank() <= order[i].ProblemRank() {
			t.Errorf("%s ranks %d, not worse than %s's %d", order[i-1], order[i-1].ProblemRank(), order[i], order[i].ProblemRank())
		}
	}
	for _, tt := range []struct {
		phase         ClusterPhase
		done, failing bool
	}{
		{ClusterPhaseSynced, true, false}, {ClusterPhaseDryRun, true, false}, {ClusterPhasePending, false, false},
		{ClusterPhaseLockHeld, false, true}, {ClusterPhaseUnsupported, false, true}, {ClusterPhaseConflict, false, true}, {ClusterPhaseFailed, false, true},
	} {
		if tt.phase.Done() != tt.done || tt.phase.Failing() != tt.failing {
			t.Errorf("%s: done %v failing %v, want %v %v", tt.phase, tt.phase.Done(), tt.phase.Failing(), tt.done, tt.failing)
		}
	}
}
