package pages

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/ui/read"
)

func summary(cluster string, policies ...policyhubv1.PolicySummary) policyhubv1.PolicyReportSummary {
	return policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: policyhubv1.SummaryName},
		Spec: policyhubv1.PolicyReportSummarySpec{Policies: policies}}
}

func policy(name, kind, severity string, fail int64) policyhubv1.PolicySummary {
	return policyhubv1.PolicySummary{Name: name, Kind: kind, Severity: severity, Results: policyhubv1.ResultCounts{Fail: fail, Pass: 1}}
}

func TestFleetWorstFirstFilteredAndLinked(t *testing.T) {
	s := &read.Snapshot{Now: time.Now(), Clusters: map[string]map[string]string{
		"a": {"env": "prod"}, "b": {"env": "prod"}, "c": {"env": "dev"}, "dark": {"env": "prod"},
	}}
	s.Summaries = []policyhubv1.PolicyReportSummary{
		summary("a", policy("latest", "ClusterPolicy", "high", 1), policy("labels", "ValidatingPolicy", "low", 0)),
		summary("b", policy("latest", "ClusterPolicy", "high", 7), policy("labels", "ValidatingPolicy", "low", 30)),
		summary("c", policy("latest", "ClusterPolicy", "high", 100)),
	}
	fp := policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-latest"}}
	fp.Spec.Template.Kind, fp.Spec.Template.Metadata.Name = "ClusterPolicy", "latest"
	s.FleetPolicies = []policyhubv1.FleetPolicy{fp}
	s.Slices = []policyhubv1.ClusterStatusSlice{{Declaration: policyhubv1.DeclarationRef{Kind: policyhubv1.KindFleetPolicy, Name: "no-latest"},
		Clusters: []policyhubv1.ClusterStatus{{Name: "dark", Phase: policyhubv1.ClusterPhaseFailed, Message: "dark: unreachable: dial tcp: i/o timeout"}}}}

	f := BuildFleet(s, FleetQuery{Selector: "env=prod"})
	rows := []string{}
	for _, r := range f.Rows {
		rows = append(rows, r.Cluster)
	}
	if got, want := rows, []string{"b", "a", "dark"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v (worst first, the unreachable one after those with violations, c filtered out)", got, want)
	}
	if f.Columns[0].Name != "labels" || f.Columns[0].Violations != 30 || f.Columns[1].Name != "latest" || f.Columns[1].Violations != 8 {
		t.Errorf("columns %+v, want labels (30) then latest (8)", f.Columns)
	}
	if f.Columns[1].Declaration != "/policies/fleetpolicy/no-latest" || f.Columns[0].Declaration != "" {
		t.Errorf("links %q %q: want latest linked to its FleetPolicy and labels not", f.Columns[1].Declaration, f.Columns[0].Declaration)
	}
	if c := f.Rows[0].Cells[0]; !c.Reported || c.Violations != 30 || c.Level != 2 {
		t.Errorf("b×labels = %+v, want 30 at level 2", c)
	}
	if c := f.Rows[1].Cells[0]; !c.Reported || c.Violations != 0 || c.Level != 0 {
		t.Errorf("a×labels = %+v, want a reported 0", c)
	}
	if c := f.Rows[2].Cells[0]; c.Reported {
		t.Errorf("dark×labels = %+v, want not reported", c)
	}
	if !f.Rows[2].Unreachable || f.Totals.Unreachable != 1 || f.Totals.Unreported != 1 || f.Totals.Failing != 2 || f.Totals.Results.Fail != 38 {
		t.Errorf("totals %+v; dark %+v", f.Totals, f.Rows[2])
	}

	high := BuildFleet(s, FleetQuery{Severity: "high"})
	if len(high.Columns) != 1 || high.Rows[0].Cluster != "c" || high.Rows[0].Violations != 100 || high.Rows[0].Cells[0].Level != 3 {
		t.Errorf("severity=high: columns %+v, first row %+v", high.Columns, high.Rows[0])
	}
	if bad := BuildFleet(s, FleetQuery{Selector: "env in ("}); bad.SelectorError == "" || len(bad.Rows) != 4 {
		t.Errorf("a wrong selector: error %q, %d rows; want the error named and every cluster shown", bad.SelectorError, len(bad.Rows))
	}
}

func TestPaginate(t *testing.T) {
	url := func(p int) string { return string(rune('0' + p)) }
	for _, tc := range []struct {
		total, page               int
		wantPage, from, to, count int
		prev, next                string
	}{
		{0, 0, 0, 0, 0, 1, "", ""},
		{10, 3, 0, 1, 10, 1, "", ""},
		{120, 1, 1, 51, 100, 3, "0", "2"},
		{120, 9, 2, 101, 120, 3, "1", ""},
		{120, -4, 0, 1, 50, 3, "", "1"},
	} {
		p := paginate(tc.total, tc.page, url)
		if p.Page != tc.wantPage || p.From != tc.from || p.To != tc.to || p.Count != tc.count || p.Prev != tc.prev || p.Next != tc.next {
			t.Errorf("paginate(%d, %d) = %+v", tc.total, tc.page, p)
		}
	}
}

func TestFleetEmpty(t *testing.T) {
	f := BuildFleet(&read.Snapshot{Now: time.Now()}, FleetQuery{RowPage: 3, ColPage: 2})
	if len(f.Rows) != 0 || len(f.Columns) != 0 || f.RowPages.Total != 0 || f.ColPages.Total != 0 {
		t.Errorf("an empty hub: %+v", f)
	}
	noSummaries := BuildFleet(&read.Snapshot{Now: time.Now(), Clusters: map[string]map[string]string{"a": nil}}, FleetQuery{})
	if len(noSummaries.Rows) != 1 || noSummaries.Rows[0].Reported || len(noSummaries.Columns) != 0 {
		t.Errorf("a cluster without a summary: %+v", noSummaries)
	}
}
