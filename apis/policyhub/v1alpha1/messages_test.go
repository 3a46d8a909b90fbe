package v1alpha1

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateMessage(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short enough", "denied", 10, "denied"},
		{"exactly n", "denied", 6, "denied"},
		{"ascii cut", "the request was denied", 10, "the req..."},
		{"a character that fits whole is kept", "ab€€x", 8, "ab€..."}, // "€" is 3 bytes
		{"cut inside the second character", "ab€€€", 9, "ab€..."},
		{"tiny n", "€€", 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncateMessage(tc.in, tc.n)
			if got != tc.want {
				t.Errorf("TruncateMessage(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
			if len(got) > tc.n || !utf8.ValidString(got) {
				t.Errorf("TruncateMessage(%q, %d) = %q: %d bytes, valid UTF-8 %v", tc.in, tc.n, got, len(got), utf8.ValidString(got))
			}
		})
	}
}

func TestCutUTF8NeverSplits(t *testing.T) {
	s := strings.Repeat("héllo wörld 日本 ", 20)
	for n := 0; n <= len(s); n++ {
		got := CutUTF8(s, n)
		if len(got) > n || !utf8.ValidString(got) || !strings.HasPrefix(s, got) || n-len(got) >= utf8.UTFMax {
			t.Fatalf("CutUTF8(s, %d) = %q (%d bytes)", n, got, len(got))
		}
	}
}

func TestCutUTF8(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},   // é is 2 bytes: cut before it
		{"a日", 3, "a"},   // 日 is 3 bytes
		{"a日", 4, "a日"},  // fits
		{"ab🙂", 5, "ab"}, // 4-byte character
		{"\x80\x80\x80\x80\x80", 4, "\x80\x80\x80\x80"}, // not UTF-8: cut at n rather than at 0
	}
	for _, tt := range tests {
		if got := CutUTF8(tt.in, tt.n); got != tt.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
