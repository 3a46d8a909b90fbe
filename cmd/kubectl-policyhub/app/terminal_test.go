package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// hostile is what a hostile agent or cluster may write into any string the CLI prints: clear the
// screen, turn red, go back to the start of the line; a line break and a tab inside a cell; BEL,
// DEL, a C1 CSI (obeyed by UTF-8 terminals), a right-to-left override, and a byte that is not
// UTF-8.
const hostile = "\x1b[2J\x1b[31mEVIL\r\n\tnext\x07\x7f\u009b1m\u202e\xff"

func TestTermSafe(t *testing.T) {
	tests := []struct {
		name, in, keep, want string
	}{
		{name: "plain text is kept", in: "Deployment/shop/web: pin the image", want: "Deployment/shop/web: pin the image"},
		{name: "non-ASCII text is kept", in: "größe ✓ 名前", want: "größe ✓ 名前"},
		{name: "ESC sequences and CR", in: "\x1b[2J\x1b[31mEVIL\r", want: `\x1b[2J\x1b[31mEVIL\r`},
		{name: "OSC 52 clipboard write", in: "\x1b]52;c;ZXZpbA==\x07", want: `\x1b]52;c;ZXZpbA==\a`},
		{name: "DEL and C1", in: "a\x7fb\u009bc\u0085d", want: `a\x7fb\u009bc\u0085d`},
		{name: "bidi override", in: "txt.\u202eexe", want: `txt.\u202eexe`},
		{name: "invalid UTF-8", in: "a\xffb\xc3", want: `a\xffb\xc3`},
		{name: "a real U+FFFD is kept", in: "a\ufffdb", want: "a\ufffdb"},
		{name: "newline and tab escaped within a line", in: "a\nb\tc", want: `a\nb\tc`},
		{name: "newline and tab kept as layout", in: "a\nb\tc\r", keep: "\t\n", want: "a\nb\tc\\r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := termSafe(tt.in, tt.keep); got != tt.want {
				t.Errorf("termSafe(%q, %q) = %q, want %q", tt.in, tt.keep, got, tt.want)
			}
		})
	}
}

func TestCellText(t *testing.T) {
	for in, want := range map[string]string{
		"one line":                      "one line",
		"denied:\n  rule a\r\n  rule b": "denied:   rule a   rule b",
		"a\tb":                          "a b",
		"\x1b[2J\x1b[31mEVIL\r":         `\x1b[2J\x1b[31mEVIL\r`,
	} {
		if got := cellText(in); got != want {
			t.Errorf("cellText(%q) = %q, want %q", in, got, want)
		}
	}
}

// assertTerminalSafe fails unless out holds nothing a terminal acts on but newlines: no C0
// control (ESC, CR, tab...), DEL, C1 control, bidi control (unless allowed) or invalid UTF-8.
func assertTerminalSafe(t *testing.T, what string, out []byte, allowBidi ...bool) {
	t.Helper()
	if !utf8.Valid(out) {
		t.Errorf("%s: output is not UTF-8:\n%q", what, out)
	}
	for _, r := range string(out) {
		if r != '\n' && (unicode.IsControl(r) || (len(allowBidi) == 0 && unicode.Is(unicode.Bidi_Control, r))) {
			t.Errorf("%s: output holds %U:\n%q", what, r, out)
			return
		}
	}
}

// poison sets every string reachable from v (a pointer) to s, giving every slice one element,
// every map one entry and every nil pointer a value, so that a printer meets s in every field.
func poison(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() && v.CanSet() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			poison(v.Elem(), s)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				poison(v.Field(i), s)
			}
		}
	case reflect.Slice:
		if v.CanSet() {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			poison(v.Index(0), s)
		}
	case reflect.Map:
		if v.CanSet() && v.Type().Key().Kind() == reflect.String {
			m := reflect.MakeMap(v.Type())
			val := reflect.New(v.Type().Elem()).Elem()
			poison(val, s)
			m.SetMapIndex(reflect.ValueOf(s).Convert(v.Type().Key()), val)
			v.Set(m)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(s)
		}
	}
}

func poisoned[T any](s string) *T {
	v := new(T)
	poison(reflect.ValueOf(v), s)
	return v
}

// Every table, fed the hostile string in every field, prints it escaped: no ESC, CR or other
// control reaches the terminal, and messages stay on their row.
func TestTablesAreTerminalSafe(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tables := []struct {
		name  string
		print func(w io.Writer)
		rows  int // lines the table prints, when each field stays on its line; 0: not counted
	}{
		{name: "status", print: func(w io.Writer) { printStatusTable(w, poisoned[statusReport](hostile), now) }, rows: 3}, // header, <source>, cluster
		{name: "info", print: func(w io.Writer) { printInfoTable(w, poisoned[infoReport](hostile), now) }, rows: 21},
		{name: "status exceptions", print: func(w io.Writer) { printStatusExceptions(w, poisoned[statusReport](hostile), now) }, rows: 1},
		{name: "exception list", print: func(w io.Writer) {
			printExceptionTable(w, exceptionRows(poisoned[policyhubv1.FleetPolicyExceptionList](hostile).Items, now), true)
		}, rows: 2},
		{name: "clusters", print: func(w io.Writer) { printClustersTable(w, poisoned[clustersReport](hostile)) }, rows: 2},
		{name: "inventory", print: func(w io.Writer) { printInventoryTable(w, poisoned[inventoryReport](hostile)) }},
		{name: "rollout", print: func(w io.Writer) { printRolloutTable(w, *poisoned[[]rolloutRow](hostile)) }, rows: 2},
		{name: "sync", print: func(w io.Writer) { syncWriteTable(w, poisoned[syncReport](hostile)) }},
		{name: "check", print: func(w io.Writer) { checkWriteTable(w, poisoned[checkReport](hostile)) }},
	}
	for _, tt := range tables {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeReport(&out, "table", nil, func(w io.Writer) error { tt.print(w); return nil }); err != nil {
				t.Fatal(err)
			}
			assertTerminalSafe(t, tt.name, out.Bytes())
			if !strings.Contains(out.String(), `\x1b[2J\x1b[31mEVIL`) {
				t.Errorf("the hostile text is not shown, escaped:\n%s", out.String())
			}
			if lines := strings.Count(out.String(), "\n"); tt.rows > 0 && lines != tt.rows {
				t.Errorf("%d lines, want %d: a field broke its row:\n%s", lines, tt.rows, out.String())
			}
		})
	}
}

// The brief's case, through the status table: a cluster's message clearing the screen.
func TestStatusMessageWithEscapes(t *testing.T) {
	report := &statusReport{Declarations: []declarationStatus{{Kind: kindFleetPolicy, Name: "team",
		Clusters: []declarationCluster{{Name: "cluster-1", Phase: "Failed", Message: "\x1b[2J\x1b[31mEVIL\r"}}}}}
	var out bytes.Buffer
	if err := writeReport(&out, "table", report, func(w io.Writer) error { printStatusTable(w, report, time.Now()); return nil }); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\r") {
		t.Errorf("ESC or CR reached the terminal:\n%q", out.String())
	}
	// (The status table puts messages on one line by their words: the CR goes with the spaces.)
	if !strings.Contains(out.String(), `cluster-1   -        Failed   -         -      -       0         -          \x1b[2J\x1b[31mEVIL`+"\n") {
		t.Errorf("the message is not shown escaped in its cell:\n%s", out.String())
	}
}

// -o json and -o yaml keep every value as it is, but no control in them acts on a terminal
// either: encoding/json leaves DEL and C1 raw; they are written as \u escapes (the same string),
// and YAML then gets them escaped too instead of refusing them. (Bidi controls stay, as the YAML
// emitter writes them.)
func TestJSONAndYAMLAreTerminalSafe(t *testing.T) {
	value := strings.ToValidUTF8(hostile, "\ufffd")
	report := map[string]any{"message": value, value: []string{value}}
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		if err := writeReport(&out, format, report, nil); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		assertTerminalSafe(t, "-o "+format, out.Bytes(), true)
		var back map[string]any
		var err error
		if format == "json" {
			err = json.Unmarshal(out.Bytes(), &back)
		} else {
			err = yaml.Unmarshal(out.Bytes(), &back)
		}
		if err != nil {
			t.Fatalf("-o %s does not read back: %v\n%s", format, err, out.String())
		}
		if back["message"] != value || !reflect.DeepEqual(back[value], []any{value}) {
			t.Errorf("-o %s changed the values: %q", format, back)
		}
	}
}

// A character split between two writes is printed whole; a write cut in the middle of one is
// completed by Flush, escaped.
func TestSafeWriterHoldsSplitCharacters(t *testing.T) {
	var out bytes.Buffer
	w := newSafeWriter(&out, "\n")
	for _, chunk := range []string{"ä", "✓"[:1], "✓"[1:], "\u009b"[:1], "\u009b"[1:] + "x\n", "\xe2\x9c"} {
		if _, err := io.WriteString(w, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "ä✓\\u009bx\n\\xe2\\x9c"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}

// What goes to stderr is terminal-safe too: here an error that quotes the kubeconfig's path.
func TestStderrIsTerminalSafe(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"clusters", "--kubeconfig", "/nonexistent/\x1b[2J\x1b[31mEVIL\r"}, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != ExitError {
		t.Fatalf("exit %d, want %d; stderr %q", code, ExitError, errOut.String())
	}
	assertTerminalSafe(t, "stderr", errOut.Bytes())
	if !strings.Contains(errOut.String(), `/nonexistent/\x1b[2J\x1b[31mEVIL`) {
		t.Errorf("stderr does not quote the path, escaped: %q", errOut.String())
	}
}
