package textsafe

import "testing"

func TestVisible(t *testing.T) {
	for _, tc := range []struct{ in, keep, want string }{
		{"plain ünïcode", "", "plain ünïcode"},
		{"clear\x1b[2Jscreen", "", `clear\x1b[2Jscreen`},
		{"ok\rfake", "", `ok\rfake`},
		{"a\tb\nc", "\t\n", "a\tb\nc"},
		{"a\tb", "", `a\tb`},
		{"evil\u202egnp.exe", "", `evil\u202egnp.exe`},
		{"c1\u009bx", "", `c1\u009bx`},
		{"bad\xffutf8", "", `bad\xffutf8`},
		{"del\x7f", "", `del\x7f`},
	} {
		if got := Visible(tc.in, tc.keep); got != tc.want {
			t.Errorf("Visible(%q, %q) = %q, want %q", tc.in, tc.keep, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got, want := Line("one\r\ntwo\nthree\tfour\u202e"), `one two three four\u202e`; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
}
