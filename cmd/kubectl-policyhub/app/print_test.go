package app

import (
	"bytes"
	"io"
	"testing"
)

func TestWriteReportFormats(t *testing.T) {
	report := struct {
		Items []string `json:"items"`
		Count int      `json:"count"`
	}{Items: []string{"a"}, Count: 0}
	table := func(w io.Writer) error {
		tableRow(w, "NAME", "VALUE")
		tableRow(w, "a-long-name", "")
		tableRow(w, "b", "2")
		return nil
	}
	for _, tc := range []struct{ format, want string }{
		{"json", "{\n  \"items\": [\n    \"a\"\n  ],\n  \"count\": 0\n}\n"},
		{"yaml", "count: 0\nitems:\n- a\n"},
		{"table", "NAME          VALUE\na-long-name   -\nb             2\n"},
	} {
		var out bytes.Buffer
		if err := writeReport(&out, tc.format, report, table); err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if out.String() != tc.want {
			t.Errorf("-o %s:\n%q\nwant\n%q", tc.format, out.String(), tc.want)
		}
	}
	if err := writeReport(io.Discard, "xml", report, table); err == nil {
		t.Error("-o xml: no error")
	}
}

// Each table of a report is aligned on its own: a line without tabs ends a table.
func TestTablesAlignedOnTheirOwn(t *testing.T) {
	var out bytes.Buffer
	err := writeReport(&out, "table", nil, func(w io.Writer) error {
		tableRow(w, "A-VERY-LONG-HEADER", "X")
		io.WriteString(w, "\n")
		tableRow(w, "B", "Y")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "A-VERY-LONG-HEADER   X\n\nB     Y\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}

func TestCellHelpers(t *testing.T) {
	if got := labelString(map[string]string{"env": "prod", "a": "b"}); got != "a=b,env=prod" {
		t.Errorf("labelString: %q", got)
	}
	if got := labelString(nil); got != "<none>" {
		t.Errorf("labelString(nil): %q", got)
	}
	if got := listString(nil); got != "<none>" {
		t.Errorf("listString(nil): %q", got)
	}
	if got := (resourceRef{Kind: "Namespace", Name: "x"}).String(); got != "Namespace/x" {
		t.Errorf("cluster-scoped ref: %q", got)
	}
	if got := (resourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}).String(); got != "Deployment/shop/web" {
		t.Errorf("namespaced ref: %q", got)
	}
}
