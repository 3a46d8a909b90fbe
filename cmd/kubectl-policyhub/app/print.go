package app

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
)

// Output helpers shared by the commands: every command builds one report value (a documented
// struct, never raw API objects) and prints it as -o json, -o yaml, or a table.

// printReport prints report to o's output as -o json or -o yaml; for -o table it calls table with
// a tab writer (columns separated by tabs, aligned on flush; see newTableWriter).
func (o *options) printReport(report any, table func(w io.Writer) error) error {
	return writeReport(o.streams.Out, o.output, report, table)
}

// writeReport is printReport for any writer and format.
func writeReport(out io.Writer, format string, report any, table func(w io.Writer) error) error {
	switch format {
	case "json":
		data, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(jsonTerminalSafe(data), '\n'))
		return err
	case "yaml":
		// sigs.k8s.io/yaml.Marshal's own way (JSON, then YAML), with the JSON escaped first: its
		// YAML parser refuses the DEL and C1 characters encoding/json leaves raw, and its
		// emitter escapes them once they arrive as \u escapes.
		data, err := json.Marshal(report)
		if err != nil {
			return err
		}
		if data, err = yaml.JSONToYAML(jsonTerminalSafe(data)); err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	case "table", "":
		// Cells are made one line and safe by tableRow and syncColumns; the filter in front of
		// the tab writer catches whatever else a table prints (tabs and newlines are layout),
		// before the tab writer measures it or reads a byte 0xff as its escape character.
		tw := newTableWriter(out)
		safe := newSafeWriter(tw, "\t\n")
		if err := table(safe); err != nil {
			return err
		}
		if err := safe.Flush(); err != nil {
			return err
		}
		return tw.Flush()
	}
	return usageError{fmt.Errorf("-o %q: choose table, json or yaml", format)}
}

// newTableWriter aligns tab-separated cells as kubectl's tables do (cli-runtime's printers use
// the same widths and padding), except that each block of lines — a table, separated from the
// next by a line without tabs — is aligned on its own: kubectl remembers column widths across
// blocks, for watch output, which would stretch a report's later tables to its first one's widths.
func newTableWriter(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 6, 4, 3, ' ', 0)
}

// tableRow writes one row of a table: cells separated by tabs. An empty cell is printed as "-"
// so that every column of every row has a value (and the table stays parseable by whitespace);
// a cell is one line, terminal-safe (cellText).
func tableRow(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = cellText(c)
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// humanAge is kubectl's age of t at now ("42s", "3m12s", "5d"); "<unknown>" for a missing time.
func humanAge(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// labelString is labels as kubectl --show-labels prints them: k=v pairs sorted by key, comma
// separated; "<none>" when there are none.
func labelString(labels map[string]string) string {
	if len(labels) == 0 {
		return "<none>"
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return strings.Join(pairs, ",")
}

// listString joins items with commas; "<none>" when there are none.
func listString(items []string) string {
	if len(items) == 0 {
		return "<none>"
	}
	return strings.Join(items, ",")
}

// itoa formats a count for a table cell.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// reportCounts are policy report results. Unlike the API's ResultCounts, every field is always
// printed (0 included), so the JSON and YAML shapes do not depend on the values; a kind some
// counted cluster's Kyverno does not write (its --allowedResults) is null, never 0.
type reportCounts struct {
	Pass  int64 `json:"pass"`
	Fail  int64 `json:"fail"`
	Warn  int64 `json:"warn"`
	Error int64 `json:"error"`
	Skip  int64 `json:"skip"`
	// unknown are the result kinds that are not known: a counted cluster does not report them.
	unknown map[string]bool
}

func toReportCounts(c policyhubv1.ResultCounts) reportCounts {
	return reportCounts{Pass: c.Pass, Fail: c.Fail, Warn: c.Warn, Error: c.Error, Skip: c.Skip}
}

// summaryCounts are counts from summary s, the result kinds its cluster's Kyverno does not
// write unknown.
func summaryCounts(s *policyhubv1.PolicyReportSummary, c policyhubv1.ResultCounts) reportCounts {
	out := toReportCounts(c)
	for _, kind := range resultKinds {
		if !s.Spec.Engine.ReportsResult(kind) {
			if out.unknown == nil {
				out.unknown = map[string]bool{}
			}
			out.unknown[kind] = true
		}
	}
	return out
}

// passKnown is c with pass unknown unless known.
func passKnown(c reportCounts, known bool) reportCounts {
	if !known {
		c.add(reportCounts{unknown: map[string]bool{"pass": true}})
	}
	return c
}

// resultKinds are Kyverno's result kinds, in the order tables print them.
var resultKinds = []string{"pass", "fail", "warn", "error", "skip"}

// add adds d's counts, as the hub does: saturating, a negative count as 0. A kind unknown in
// either is unknown in the sum.
func (c *reportCounts) add(d reportCounts) {
	c.Pass = aggregate.AddCount(c.Pass, d.Pass)
	c.Fail = aggregate.AddCount(c.Fail, d.Fail)
	c.Warn = aggregate.AddCount(c.Warn, d.Warn)
	c.Error = aggregate.AddCount(c.Error, d.Error)
	c.Skip = aggregate.AddCount(c.Skip, d.Skip)
	for kind := range d.unknown {
		if c.unknown == nil {
			c.unknown = map[string]bool{}
		}
		c.unknown[kind] = true
	}
}

// count is the count of kind; ok is false when it is unknown.
func (c reportCounts) count(kind string) (n int64, ok bool) {
	n = map[string]int64{"pass": c.Pass, "fail": c.Fail, "warn": c.Warn, "error": c.Error, "skip": c.Skip}[kind]
	return n, !c.unknown[kind]
}

// cell is the count of kind for a table: "-" when unknown.
func (c reportCounts) cell(kind string) string {
	n, ok := c.count(kind)
	if !ok {
		return "-"
	}
	return itoa(n)
}

// MarshalJSON prints every kind, an unknown one as null.
func (c reportCounts) MarshalJSON() ([]byte, error) {
	shown := struct {
		Pass  *int64 `json:"pass"`
		Fail  *int64 `json:"fail"`
		Warn  *int64 `json:"warn"`
		Error *int64 `json:"error"`
		Skip  *int64 `json:"skip"`
	}{}
	for kind, field := range map[string]**int64{"pass": &shown.Pass, "fail": &shown.Fail, "warn": &shown.Warn, "error": &shown.Error, "skip": &shown.Skip} {
		if n, ok := c.count(kind); ok {
			*field = &n
		}
	}
	return json.Marshal(shown)
}

// violations is fail + error: the results that count as violations (exit code 1).
func (c reportCounts) violations() int64 { return aggregate.AddCount(c.Fail, c.Error) }

// resourceRef names one Kubernetes resource in a report.
type resourceRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func toResourceRef(r policyhubv1.ResourceRef) resourceRef {
	return resourceRef{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// String is Kind/namespace/name (Kind/name for cluster-scoped resources).
func (r resourceRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}
