package textsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible returns s with every control character replaced by its Go escape (\x1b, \r, \x7f,
// \u009b, \u202e; \xff for a byte that is not UTF-8): C0 controls (ESC and CR included), DEL, C1
// controls (which UTF-8 terminals also obey), bidirectional-text controls (which reorder what is
// shown) and invalid UTF-8. The escape shows that something was there and does nothing. keep lists
// the layout characters let through: "\t\n" for a table's stream, "" within one cell or line.
func Visible(s, keep string) string {
	if isVisible(s, keep) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r) && !strings.ContainsRune(keep, r):
			q := strconv.QuoteRune(r) // '\x1b'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isVisible(s, keep string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (unsafeRune(r) && !strings.ContainsRune(keep, r)) {
			return false
		}
	}
	return true
}

// unsafeRune: a control character (C0, DEL, C1) or a bidirectional-text control.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// Line is s as one line: line breaks and tabs become spaces (a message must not break a table's
// rows or columns), and Visible does the rest.
func Line(s string) string {
	return Visible(lineSpaces.Replace(s), "")
}

var lineSpaces = strings.NewReplacer("\r\n", " ", "\n", " ", "\t", " ")
