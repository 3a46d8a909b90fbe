package v1alpha1

import (
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
