package pages

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/ui/read"
)

// PageSize is how many clusters (rows) and policies (columns) one page of the grid shows: 2,500
// cells, readable, and a page of HTML in the low hundreds of kilobytes at any fleet size.
const PageSize = 50

// FleetQuery is what the fleet grid is asked for (the URL's query).
type FleetQuery struct {
	// Selector filters clusters by label (kubectl's syntax: env=prod,tier!=edge).
	Selector string
	// Engine, Kind, Severity and Category filter policies.
	Engine, Kind, Severity, Category string
	// RowPage and ColPage are the page of clusters and of policies, from 0.
	RowPage, ColPage int
}

// Fleet is the compliance grid: clusters × policies, worst first both ways.
type Fleet struct {
	Query FleetQuery
	// SelectorError says why Selector was not understood (the grid then shows every cluster).
	SelectorError string
	Totals        FleetTotals
	// Engines, Kinds, Severities and Categories are the filters' choices.
	Engines, Kinds, Severities, Categories []string
	Columns                                []Column
	Rows                                   []Row
	RowPages, ColPages                     Pages
}

// FleetTotals count over the clusters and policies the filters keep.
type FleetTotals struct {
	Clusters, Policies int
	Results            policyhubv1.ResultCounts
	// Failing counts clusters with at least one fail or error.
	Failing int
	// Stale counts clusters whose agent went quiet, Unreported those with no summary yet,
	// Unreachable those the hub could not reach, NotSynced those where a declaration is not Synced.
	Stale, Unreported, Unreachable, NotSynced int
	// PassUnknown counts clusters whose Kyverno writes no pass results (--allowedResults):
	// Results.Pass leaves them out.
	PassUnknown int
}

// Pages places one page among the others.
type Pages struct {
	Page, Count int // Page from 0
	From, To    int // 1-based, inclusive
	Total       int
	Prev, Next  string
}

// Column is one Kyverno policy as the clusters' summaries report it.
type Column struct {
	Kind, Namespace, Name, Severity, Category string
	// Engine enforcing the policy: Kyverno, Kubernetes or Gatekeeper.
	Engine string
	// Violations sums fail and error results over the filtered clusters; Failing counts them.
	Violations int64
	Failing    int
	// Declaration is the page of the hub's declaration that ships the policy ("" when none
	// does: the cluster's own).
	Declaration string
}

// Ref is the policy as summaries and violations name it (namespace/name for a namespaced one).
func (c Column) Ref() string { return policyhubv1.PolicyRef(c.Namespace, c.Name) }

// Row is one cluster.
type Row struct {
	Cluster string
	Labels  map[string]string
	// Engines are the policy engines the cluster's agent reported it runs (nil: not reported).
	Engines []policyhubv1.PolicyEngine
	// Violations sums fail and error over the filtered policies, Results every result.
	Violations                   int64
	Results                      policyhubv1.ResultCounts
	Reported, Stale, Unreachable bool
	// PassUnknown: the cluster's Kyverno writes no pass results.
	PassUnknown bool
	// Age is how long ago the hub last heard from the cluster's agent (0 when never).
	Age time.Duration
	// NotSynced counts the declarations not Synced there; Phase is the worst of their phases.
	NotSynced int
	Phase     string
	Cells     []Cell
}

// Cell is one cluster's results for one policy.
type Cell struct {
	// Reported: the cluster's summary has the policy.
	Reported   bool
	Violations int64
	Pass       int64
	// Level is the colour band: 0 none, 1 under 10, 2 under 100, 3 from 100.
	Level int
}

// BuildFleet computes the grid for q from s.
func BuildFleet(s *read.Snapshot, q FleetQuery) *Fleet {
	f := &Fleet{Query: q}
	selector := labels.Everything()
	if q.Selector != "" {
		parsed, err := labels.Parse(q.Selector)
		if err != nil {
			f.SelectorError = fmt.Sprintf("selector %q: %v", q.Selector, err)
		} else {
			selector = parsed
		}
	}

	// Columns: every policy any summary reports, then the filters.
	colIndex := map[policyKey]int{}
	var columns []Column
	engines, kinds, severities, categories := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := range s.Summaries {
		for _, p := range s.Summaries[i].Spec.Policies {
			k := policyKey{p.Kind, p.Namespace, p.Name}
			if _, ok := colIndex[k]; ok {
				continue
			}
			engine := string(policyhubv1.EngineOrKyverno(p.Engine))
			engines[engine], kinds[p.Kind], severities[p.Severity], categories[p.Category] = true, true, true, true
			colIndex[k] = len(columns)
			columns = append(columns, Column{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Severity: p.Severity, Category: p.Category, Engine: engine})
		}
	}
	f.Engines, f.Kinds, f.Severities, f.Categories = sortedKeys(engines), sortedKeys(kinds), sortedKeys(severities), sortedKeys(categories)
	keepCol := make([]bool, len(columns))
	for i, c := range columns {
		keepCol[i] = (q.Engine == "" || c.Engine == q.Engine) && (q.Kind == "" || c.Kind == q.Kind) && (q.Severity == "" || c.Severity == q.Severity) &&
			(q.Category == "" || c.Category == q.Category)
	}
	declarations := declarationsByPolicy(s)

	// Rows: every cluster of the inventory or with a summary, then the selector.
	summaries := make(map[string]*policyhubv1.PolicyReportSummary, len(s.Summaries))
	for i := range s.Summaries {
		summaries[s.Summaries[i].Namespace] = &s.Summaries[i]
	}
	names := make([]string, 0, len(s.Clusters)+len(summaries))
	for name := range s.Clusters {
		names = append(names, name)
	}
	for name := range summaries {
		if _, ok := s.Clusters[name]; !ok {
			names = append(names, name)
		}
	}
	states := clusterStates(s)
	type rowData struct {
		row   Row
		cells []int64 // by column; -1: not reported
	}
	var rows []rowData
	for _, name := range names {
		if !selector.Matches(labels.Set(s.Clusters[name])) {
			continue
		}
		r := rowData{row: Row{Cluster: name, Labels: s.Clusters[name]}}
		st := states[name]
		r.row.Unreachable, r.row.NotSynced, r.row.Phase = st.unreachable, st.notSynced, st.worst
		if sum := summaries[name]; sum != nil {
			r.row.Reported = true
			r.row.Engines = sum.Spec.Engine.Engines
			r.row.Stale = aggregate.JudgedStale(sum)
			r.row.PassUnknown = !sum.Spec.Engine.ReportsResult("pass")
			if at, _ := aggregate.ObservedAt(sum, s.Now); !at.IsZero() {
				r.row.Age = s.Now.Sub(at)
			}
			r.cells = make([]int64, len(columns))
			for i := range r.cells {
				r.cells[i] = -1
			}
			for _, p := range sum.Spec.Policies {
				i := colIndex[policyKey{p.Kind, p.Namespace, p.Name}]
				if !keepCol[i] {
					continue
				}
				v := aggregate.AddCount(p.Results.Fail, p.Results.Error)
				r.cells[i] = v
				r.row.Violations = aggregate.AddCount(r.row.Violations, v)
				aggregate.Add(&r.row.Results, p.Results)
				if v > 0 {
					columns[i].Violations = aggregate.AddCount(columns[i].Violations, v)
					columns[i].Failing++
				}
			}
		}
		rows = append(rows, r)
	}

	// Totals, then worst first both ways, then the pages.
	t := &f.Totals
	t.Clusters = len(rows)
	for _, r := range rows {
		aggregate.Add(&t.Results, r.row.Results)
		if r.row.Violations > 0 {
			t.Failing++
		}
		if !r.row.Reported {
			t.Unreported++
		}
		if r.row.Stale {
			t.Stale++
		}
		if r.row.PassUnknown {
			t.PassUnknown++
		}
		if r.row.Unreachable {
			t.Unreachable++
		}
		if r.row.NotSynced > 0 {
			t.NotSynced++
		}
	}
	order := make([]int, 0, len(columns))
	for i := range columns {
		if keepCol[i] {
			order = append(order, i)
		}
	}
	t.Policies = len(order)
	slices.SortFunc(order, func(a, b int) int {
		ca, cb := &columns[a], &columns[b]
		return cmp.Or(cmp.Compare(cb.Violations, ca.Violations), strings.Compare(ca.Ref(), cb.Ref()), strings.Compare(ca.Kind, cb.Kind))
	})
	slices.SortFunc(rows, func(a, b rowData) int {
		return cmp.Or(cmp.Compare(b.row.Violations, a.row.Violations), cmp.Compare(b.row.NotSynced, a.row.NotSynced),
			compareBool(b.row.Unreachable, a.row.Unreachable), compareBool(b.row.Stale, a.row.Stale),
			compareBool(a.row.Reported, b.row.Reported), strings.Compare(a.row.Cluster, b.row.Cluster))
	})
	f.ColPages = paginate(len(order), q.ColPage, func(p int) string { q := q; q.ColPage = p; return FleetURL(q) })
	f.RowPages = paginate(len(rows), q.RowPage, func(p int) string { q := q; q.RowPage = p; return FleetURL(q) })
	f.Query.RowPage, f.Query.ColPage = f.RowPages.Page, f.ColPages.Page
	var shown []int
	if f.ColPages.Total > 0 {
		shown = order[f.ColPages.From-1 : f.ColPages.To]
	}
	for _, i := range shown {
		c := columns[i]
		c.Declaration = declarations[policyKey{c.Kind, c.Namespace, c.Name}]
		if c.Declaration == "" {
			c.Declaration = declarations[policyKey{"", c.Namespace, c.Name}]
		}
		f.Columns = append(f.Columns, c)
	}
	if f.RowPages.Total > 0 {
		for _, r := range rows[f.RowPages.From-1 : f.RowPages.To] {
			row := r.row
			row.Cells = make([]Cell, len(shown))
			for j, i := range shown {
				if r.cells == nil || r.cells[i] < 0 {
					continue
				}
				row.Cells[j] = Cell{Reported: true, Violations: r.cells[i], Level: level(r.cells[i])}
			}
			f.Rows = append(f.Rows, row)
		}
	}
	return f
}

// level is a count's colour band. Colour is never the only sign: every cell shows its number.
func level(v int64) int {
	switch {
	case v <= 0:
		return 0
	case v < 10:
		return 1
	case v < 100:
		return 2
	default:
		return 3
	}
}

// paginate cuts total items into pages of PageSize, keeping page within them.
func paginate(total, page int, url func(int) string) Pages {
	count := max(1, (total+PageSize-1)/PageSize)
	page = pageIndex(total, page)
	p := Pages{Page: page, Count: count, Total: total, From: page*PageSize + 1, To: min(total, (page+1)*PageSize)}
	if total == 0 {
		p.From, p.To = 0, 0
	}
	if page > 0 {
		p.Prev = url(page - 1)
	}
	if page < count-1 {
		p.Next = url(page + 1)
	}
	return p
}

// pageIndex is page (from 0) within the pages of total rows: the last one past the end.
func pageIndex(total, page int) int {
	count := max(1, (total+PageSize-1)/PageSize)
	return min(max(page, 0), count-1)
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
