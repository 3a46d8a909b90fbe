package app

import (
	"bytes"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"

	"github.com/policyhub/policyhub/internal/textsafe"
)

// What the CLI prints comes largely from elsewhere: cluster and policy names, the hub's
// messages, and what agents and Kyverno in the managed clusters report (violation messages,
// denials, warnings). A hostile cluster could put terminal control sequences in them — ESC
// sequences that clear the screen, recolour or retitle it, or write the clipboard; a carriage
// return that overwrites a line with a reassuring one. Every table and every line to stderr
// goes through termSafe, and -o json and -o yaml escape the controls their encoders leave raw
// (jsonTerminalSafe).

// termSafe returns s with every character a terminal acts on replaced by its escape
// (textsafe.Visible); keep lists the layout characters let through: "\t\n" for a table's stream,
// "" within one cell or line.
func termSafe(s, keep string) string {
	return textsafe.Visible(s, keep)
}

// cellText is s as one table cell or one line of text: line breaks and tabs become spaces (a
// message must not break the table's rows or columns), and termSafe does the rest.
func cellText(s string) string {
	return textsafe.Line(s)
}

// safeWriter passes text on through termSafe, keeping the layout characters keep. A character
// split between two writes is held until the next one; Flush writes what is still held.
type safeWriter struct {
	w       io.Writer
	keep    string
	pending []byte
}

func newSafeWriter(w io.Writer, keep string) *safeWriter {
	return &safeWriter{w: w, keep: keep}
}

func (s *safeWriter) Write(p []byte) (int, error) {
	data := append(s.pending, p...)
	// Hold back an incomplete UTF-8 sequence at the end (at most 3 bytes).
	cut := len(data)
	for back := 1; back <= utf8.UTFMax-1 && back <= len(data); back++ {
		if c := data[len(data)-back]; utf8.RuneStart(c) {
			if !utf8.FullRune(data[len(data)-back:]) {
				cut = len(data) - back
			}
			break
		}
	}
	s.pending = bytes.Clone(data[cut:])
	if _, err := io.WriteString(s.w, termSafe(string(data[:cut]), s.keep)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what a last write left incomplete (escaped: it is not UTF-8).
func (s *safeWriter) Flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	rest := string(s.pending)
	s.pending = nil
	_, err := io.WriteString(s.w, termSafe(rest, s.keep))
	return err
}

// jsonTerminalSafe escapes in JSON text the controls encoding/json writes raw although a
// terminal obeys them: DEL and C1 (it escapes C0 itself). They can only be inside strings, where
// \uXXXX is the same character, so the document means exactly what it did. (Bidirectional-text
// controls, which only reorder what is shown, are left as they are: YAML prints them raw anyway.)
func jsonTerminalSafe(data []byte) []byte {
	if !bytes.ContainsFunc(data, func(r rune) bool { return r >= 0x7f && unicode.IsControl(r) }) {
		return data
	}
	var b bytes.Buffer
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r >= 0x7f && unicode.IsControl(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(data[i : i+size])
		}
		i += size
	}
	return b.Bytes()
}
