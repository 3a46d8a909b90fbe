package tocel

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A string pattern is Kyverno's little language for a scalar field: alternatives split on "|",
// each a conjunction split on "&", each an optional operator and a wildcard pattern. Only the
// operators "" (matches) and "!" (does not match) are converted: the others, ranges, and
// literals Kyverno would compare as a duration or a quantity are refused.

// strAtom is one condition: the wildcard pattern and whether it is negated ("!").
type strAtom struct {
	negate bool
	pat    string
}

// strPattern is a parsed string pattern; whole is the pattern as written (Kyverno first tests
// the resource value for equality with it).
type strPattern struct {
	whole string
	alts  [][]strAtom
}

var (
	inRange    = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
	notInRange = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)!-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
)

// parseStringPattern parses s as Kyverno's pattern package reads it, refusing what is not
// converted.
func parseStringPattern(where, s string) (strPattern, error) {
	sp := strPattern{whole: s}
	for _, alt := range strings.Split(s, "|") {
		var conj []strAtom
		for _, cond := range strings.Split(strings.Trim(alt, " "), "&") {
			cond = strings.Trim(cond, " ")
			op := ""
			if len(cond) >= 2 {
				switch {
				case strings.HasPrefix(cond, ">="), strings.HasPrefix(cond, "<="):
					op = cond[:2]
				case strings.HasPrefix(cond, ">"), strings.HasPrefix(cond, "<"), strings.HasPrefix(cond, "!"):
					op = cond[:1]
				case notInRange.MatchString(cond), inRange.MatchString(cond):
					return sp, refuse(where, "pattern range %q is not converted", cond)
				}
			}
			if op != "" && op != "!" {
				return sp, refuse(where, "pattern operator %s in %q is not converted (numeric, quantity and duration comparisons)", op, s)
			}
			p := strings.TrimSpace(cond[len(op):])
			if _, err := time.ParseDuration(p); err == nil {
				return sp, refuse(where, "pattern %q: Kyverno compares %q as a duration; not converted", s, p)
			}
			if _, err := resource.ParseQuantity(p); err == nil {
				return sp, refuse(where, "pattern %q: Kyverno compares %q as a quantity; not converted", s, p)
			}
			conj = append(conj, strAtom{negate: op == "!", pat: p})
		}
		sp.alts = append(sp.alts, conj)
	}
	return sp, nil
}

// body reports whether text (a value's rendering) satisfies the alternatives, as Kyverno does
// after its equality shortcut.
func (sp strPattern) body(text string) bool {
	for _, conj := range sp.alts {
		ok := true
		for _, a := range conj {
			if wildcardMatch(a.pat, text) == a.negate {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// celBody is the CEL for the alternatives over the string expression x.
func (sp strPattern) celBody(x string) string {
	var alts []string
	for _, conj := range sp.alts {
		var parts []string
		for _, a := range conj {
			m := wildcardCEL(x, a.pat)
			if a.negate {
				m = "!(" + m + ")"
			}
			parts = append(parts, m)
		}
		alts = append(alts, strings.Join(parts, " && "))
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, ") || (") + ")"
}

// check is the CEL that is true when the value x (any type but a list; lists are handled by the
// caller) satisfies the pattern, as Kyverno's pattern.Validate decides it for a string pattern.
func (sp strPattern) check(where, x string) (string, error) {
	var parts []string
	str := sp.celBody(x)
	if !sp.body(sp.whole) {
		// Kyverno accepts a string equal to the pattern before parsing it.
		str = x + " == " + quote(sp.whole) + " || " + str
	}
	parts = append(parts, "(type("+x+") == string && ("+str+"))")
	parts = append(parts, "(type("+x+") == int && ("+sp.celBody("string("+x+")")+"))")
	t, f := sp.body("true"), sp.body("false")
	switch {
	case t && f:
		parts = append(parts, "type("+x+") == bool")
	case t:
		parts = append(parts, "(type("+x+") == bool && "+x+")")
	case f:
		parts = append(parts, "(type("+x+") == bool && !"+x+")")
	}
	d, err := sp.onDouble(where)
	if err != nil {
		return "", err
	}
	if d {
		parts = append(parts, "type("+x+") == double")
	}
	// null, maps and lists never satisfy a string pattern (no duration or quantity atoms here).
	return "(" + strings.Join(parts, " || ") + ")", nil
}

// onDouble decides the pattern for a non-integer number, which Kyverno renders as Go's
// strconv.FormatFloat(v, 'E', -1, 64) (e.g. "1.5E+00", at least five characters). It is decided
// statically when no such rendering can change the answer, refused otherwise.
func (sp strPattern) onDouble(where string) (bool, error) {
	const floatRunes = "0123456789.E+-"
	fixed := func(p string) (bool, bool) {
		if strings.Trim(p, "*?") == "" {
			q := strings.Count(p, "?")
			if strings.Contains(p, "*") && q <= 5 {
				return true, true
			}
			return false, false
		}
		if strings.ContainsFunc(p, func(r rune) bool {
			return r != '*' && r != '?' && !strings.ContainsRune(floatRunes, r)
		}) {
			return false, true // a rune no rendering has: never matches
		}
		return false, false
	}
	result := false
	for _, conj := range sp.alts {
		ok := true
		for _, a := range conj {
			m, known := fixed(a.pat)
			if !known {
				return false, refuse(where, "pattern %q could match a number's text; not converted", sp.whole)
			}
			if m == a.negate {
				ok = false
			}
		}
		result = result || ok
	}
	return result, nil
}

// wildcardMatch is Kyverno's wildcard match: * matches any run of runes, ? exactly one rune,
// everything else itself; an empty pattern matches only the empty string.
func wildcardMatch(pattern, s string) bool {
	p, t := []rune(pattern), []rune(s)
	var match func(p, t []rune) bool
	match = func(p, t []rune) bool {
		for len(p) > 0 {
			switch p[0] {
			case '*':
				return match(p[1:], t) || (len(t) > 0 && match(p, t[1:]))
			case '?':
				if len(t) == 0 {
					return false
				}
			default:
				if len(t) == 0 || t[0] != p[0] {
					return false
				}
			}
			p, t = p[1:], t[1:]
		}
		return len(t) == 0
	}
	return match(p, t)
}

// wildcardCEL is the CEL for "the string x matches the wildcard pattern p", in the plainest
// form that says it.
func wildcardCEL(x, p string) string {
	if !strings.ContainsAny(p, "*?") {
		return x + " == " + quote(p)
	}
	if strings.Trim(p, "*?") == "" {
		q := strings.Count(p, "?")
		switch {
		case !strings.Contains(p, "*"):
			return fmt.Sprintf("size(%s) == %d", x, q)
		case q == 0:
			return "true"
		case q == 1:
			return x + " != ''"
		default:
			return fmt.Sprintf("size(%s) >= %d", x, q)
		}
	}
	inner := strings.Trim(p, "*")
	if !strings.ContainsAny(inner, "*?") {
		lead, trail := strings.HasPrefix(p, "*"), strings.HasSuffix(p, "*")
		switch {
		case lead && trail:
			return x + ".contains(" + quote(inner) + ")"
		case lead:
			return x + ".endsWith(" + quote(inner) + ")"
		case trail:
			return x + ".startsWith(" + quote(inner) + ")"
		}
	}
	return x + ".matches(" + quote(wildcardRegex(p)) + ")"
}

// wildcardRegex is an anchored RE2 expression equivalent to the wildcard pattern p.
func wildcardRegex(p string) string {
	var b strings.Builder
	b.WriteString("(?s)^")
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return b.String()
}
