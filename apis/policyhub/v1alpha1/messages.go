package v1alpha1

import "unicode/utf8"

// Messages in status fields and summaries are bounded in bytes (the CRDs' maxLength). The hub,
// the agent and the CLI cut them the same way: on a character boundary, never in the middle of
// a UTF-8 sequence (a cut sequence makes the object unreadable to strict JSON clients).

// CutUTF8 cuts s to at most n bytes without splitting a character.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// A character is at most UTFMax bytes: look no further back (the bytes are not UTF-8 otherwise).
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i]
		}
	}
	return s[:n]
}

// TruncateMessage cuts a message to at most n bytes, ending with "..." when it was cut.
func TruncateMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	if n <= len(ellipsis) {
		return CutUTF8(s, n)
	}
	return CutUTF8(s, n-len(ellipsis)) + ellipsis
}
