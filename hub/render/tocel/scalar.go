package tocel

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A string pattern is Kyverno's little language for a scalar field: alternatives split on "|",
// each a conjunction split on "&", each an optional operator and an operand. Converted: the
// operators "" (matches) and "!" (does not match) with a wildcard operand, and >, >=, <, <= with
// an integer bound (see numeric.go). Ranges, other bounds, and wildcard operands Kyverno would
// compare as a duration or a quantity are refused.

// strAtom is one condition: a wildcard pattern, negated for "!", or a comparison with a bound.
type strAtom struct {
	negate bool
	pat    string
	cmp    string // ">", ">=", "<", "<=" for a comparison; empty for a wildcard
	bound  int64
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
	intBound   = regexp.MustCompile(`^[-+]?[0-9]{1,15}$`)
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
			p := strings.TrimSpace(cond[len(op):])
			if op != "" && op != "!" {
				if !intBound.MatchString(p) {
					return sp, refuse(where, "pattern operator %s in %q is not converted (only integer bounds; quantity and duration bounds are not)", op, s)
				}
				n, err := strconv.ParseInt(p, 10, 64)
				if err != nil {
					return sp, refuse(where, "pattern bound %q: %v", p, err)
				}
				conj = append(conj, strAtom{cmp: op, bound: n})
				continue
			}
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

// static decides the pattern for a value whose answer does not depend on it at run time:
// each atom is asked through atom; nil from atom means "cannot be decided" (an error).
func (sp strPattern) static(atom func(strAtom) (bool, error)) (bool, error) {
	result := false
	for _, conj := range sp.alts {
		ok := true
		for _, a := range conj {
			m, err := atom(a)
			if err != nil {
				return false, err
			}
			ok = ok && m
		}
		result = result || ok
	}
	return result, nil
}

// onText is Kyverno's answer for a string that is not a quantity or duration: true, false or
// a bool's rendering. A comparison never holds for it.
func (sp strPattern) onText(text string) bool {
	b, _ := sp.static(func(a strAtom) (bool, error) {
		if a.cmp != "" {
			return false, nil
		}
		return wildcardMatch(a.pat, text) != a.negate, nil
	})
	return b
}

// onNull is Kyverno's answer for a missing or null value: wildcards fail, comparisons read 0.
func (sp strPattern) onNull() bool {
	b, _ := sp.static(func(a strAtom) (bool, error) {
		if a.cmp != "" {
			return compareInts(0, a.cmp, a.bound), nil
		}
		return false, nil
	})
	return b
}

// celFor writes the alternatives as CEL for x of one type: "string", "int" or "double"; a
// constant true or false stands for an atom decided without x.
func (sp strPattern) celFor(where, x, typ string) (string, error) {
	var alts []string
	for _, conj := range sp.alts {
		var parts []string
		dead := false
		for _, a := range conj {
			m, err := atomCEL(where, sp.whole, a, x, typ)
			if err != nil {
				return "", err
			}
			switch m {
			case "true":
				continue
			case "false":
				dead = true
			}
			parts = append(parts, m)
		}
		switch {
		case dead:
		case len(parts) == 0:
			return "true", nil
		default:
			alts = append(alts, strings.Join(parts, " && "))
		}
	}
	switch len(alts) {
	case 0:
		return "false", nil
	case 1:
		return alts[0], nil
	}
	return "(" + strings.Join(alts, ") || (") + ")", nil
}

// atomCEL is one atom for x of type typ.
func atomCEL(where, whole string, a strAtom, x, typ string) (string, error) {
	if a.cmp != "" {
		return compareCEL(x, typ, a.cmp, a.bound), nil
	}
	var m string
	switch typ {
	case "string":
		m = wildcardCEL(x, a.pat)
	case "int":
		m = wildcardCEL("string("+x+")", a.pat)
	case "double":
		known, matches := onDoubleText(a.pat)
		if !known {
			return "", refuse(where, "pattern %q could match a number's text; not converted", whole)
		}
		if matches != a.negate {
			return "true", nil
		}
		return "false", nil
	}
	if a.negate {
		m = "!(" + m + ")"
	}
	return m, nil
}

// check is the CEL that is true when the value x (any type but a list; lists are handled by the
// caller) satisfies the pattern, as Kyverno's pattern.Validate decides it for a string pattern.
func (sp strPattern) check(where, x string) (string, error) {
	var parts []string
	str, err := sp.celFor(where, x, "string")
	if err != nil {
		return "", err
	}
	if !sp.onText(sp.whole) {
		// Kyverno accepts a string equal to the pattern before parsing it.
		str = x + " == " + quote(sp.whole) + " || " + str
	}
	parts = append(parts, "(type("+x+") == string && ("+str+"))")
	for _, typ := range []string{"int", "double"} {
		c, err := sp.celFor(where, x, typ)
		if err != nil {
			return "", err
		}
		switch c {
		case "false":
		case "true":
			parts = append(parts, "type("+x+") == "+typ)
		default:
			parts = append(parts, "(type("+x+") == "+typ+" && ("+c+"))")
		}
	}
	t, f := sp.onText("true"), sp.onText("false")
	switch {
	case t && f:
		parts = append(parts, "type("+x+") == bool")
	case t:
		parts = append(parts, "(type("+x+") == bool && "+x+")")
	case f:
		parts = append(parts, "(type("+x+") == bool && !"+x+")")
	}
	if sp.onNull() {
		parts = append(parts, x+" == null")
	}
	// maps and lists never satisfy a string pattern.
	return "(" + strings.Join(parts, " || ") + ")", nil
}

// onDoubleText decides a wildcard for a non-integer number, which Kyverno renders as Go's
// strconv.FormatFloat(v, 'E', -1, 64) (e.g. "1.5E+00", at least five characters): known when no
// such rendering can change the answer.
func onDoubleText(p string) (known, matches bool) {
	const floatRunes = "0123456789.E+-"
	if strings.Trim(p, "*?") == "" {
		if strings.Contains(p, "*") && strings.Count(p, "?") <= 5 {
			return true, true
		}
		return false, false
	}
	if strings.ContainsFunc(p, func(r rune) bool {
		return r != '*' && r != '?' && !strings.ContainsRune(floatRunes, r)
	}) {
		return true, false // a rune no rendering has: never matches
	}
	return false, false
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
