package tocel

import (
	"fmt"
	"sort"
	"strings"
)

// Condition anchors, (key): pattern. With them Kyverno's matcher has three outcomes, pass, fail
// and skip, and a rule that skips does not fail. The converted validation is "does not fail",
// so for a pattern holding a condition anchor the converter writes two expressions per step,
// fail and skip (pass is neither), following pkg/engine/validate exactly:
//
//   - a map skips when one of its condition anchors does not pass (its key missing, or its
//     value not passing); otherwise it fails when one of its =()/X() anchors fails, skips when
//     it has no condition anchor and every other anchor skips, and otherwise takes the first
//     plain key that does not pass, in Kyverno's order (keys holding anchors first, in reverse
//     alphabetical order, then the others alphabetically);
//   - a list of maps fails when an element fails and skips when it is not empty and every
//     element skips;
//   - anyPattern fails when no pattern passes and one fails.

// hasCondition reports whether pat holds a condition anchor anywhere.
func hasCondition(pat any) bool {
	switch p := pat.(type) {
	case map[string]any:
		for k, v := range p {
			if m := anchorKey.FindStringSubmatch(k); m != nil && m[1] == "" {
				return true
			}
			if hasCondition(v) {
				return true
			}
		}
	case []any:
		for _, v := range p {
			if hasCondition(v) {
				return true
			}
		}
	}
	return false
}

// hasAnchor reports whether pat holds any anchor (Kyverno's hasNestedAnchors).
func hasAnchor(pat any) bool {
	switch p := pat.(type) {
	case map[string]any:
		for k, v := range p {
			if m := anchorKey.FindStringSubmatch(k); m != nil && m[1] != "+" {
				return true
			}
			if hasAnchor(v) {
				return true
			}
		}
	case []any:
		for _, v := range p {
			if hasAnchor(v) {
				return true
			}
		}
	}
	return false
}

// notFail is the CEL for "x does not fail pat": pass or skip.
func (g *patternGen) notFail(x string, pat any, where string) (string, error) {
	if !hasCondition(pat) {
		return g.pattern(x, pat, where)
	}
	fail, _, err := g.tri(x, pat, where)
	return not(fail), err
}

// tri returns the CEL for "x fails pat" and "x skips pat".
func (g *patternGen) tri(x string, pat any, where string) (fail, skip string, err error) {
	if !hasCondition(pat) {
		p, err := g.pattern(x, pat, where)
		return not(p), "false", err
	}
	switch p := pat.(type) {
	case map[string]any:
		return g.triMap(x, p, where)
	case []any:
		if len(p) != 1 {
			return "", "", refuse(where, "a list pattern with %d elements is not converted (only one element, applied to every item)", len(p))
		}
		elem, ok := p[0].(map[string]any)
		if !ok {
			return "", "", refuse(where, "a list of lists pattern is not converted")
		}
		v := g.names.name(listHint(where))
		f, s, err := g.triMap(v, elem, where+"[]")
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("(!(type(%s) == list) || %s.exists(%s, %s))", x, x, v, f),
			fmt.Sprintf("(type(%s) == list && size(%s) > 0 && %s.all(%s, %s))", x, x, x, v, s), nil
	}
	return "", "", refuse(where, "condition anchors in a %T are not converted", pat)
}

func (g *patternGen) triMap(x string, p map[string]any, where string) (fail, skip string, err error) {
	isMap := "type(" + x + ") == map"
	if x == "object" {
		isMap = "true"
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var condOK, anchorF, anchorS []string
	var plain []string
	for _, k := range keys {
		sub, at := p[k], where+"."+k
		m := anchorKey.FindStringSubmatch(k)
		if m == nil {
			if strings.ContainsAny(k, "*?") || strings.Contains(k, "{{") {
				return "", "", refuse(at, "key %q is not converted", k)
			}
			plain = append(plain, k)
			continue
		}
		key, has := m[2], present(x, m[2])
		switch m[1] {
		case "":
			f, s, err := g.tri(field(x, key), sub, at)
			if err != nil {
				return "", "", err
			}
			condOK = append(condOK, and(has, not(f), not(s)))
		case "=":
			f, s, err := g.tri(field(x, key), sub, at)
			if err != nil {
				return "", "", err
			}
			anchorF, anchorS = append(anchorF, and(has, f)), append(anchorS, and(has, s))
		case "X":
			anchorF, anchorS = append(anchorF, has), append(anchorS, "false")
		default:
			return "", "", refuse(at, "anchor %s(%s) is not converted", m[1], key)
		}
	}
	// Kyverno's order for plain keys: those holding anchors first, reversed, then the others.
	var ordered []string
	for _, k := range plain {
		if hasAnchor(p[k]) {
			ordered = append([]string{k}, ordered...)
		}
	}
	for _, k := range plain {
		if !hasAnchor(p[k]) {
			ordered = append(ordered, k)
		}
	}
	var resF, resS []string
	passedSoFar := "true"
	for _, k := range ordered {
		sub, at := p[k], where+"."+k
		has := present(x, k)
		var f, s string
		if sub == "*" {
			f, s = not(and(has, field(x, k)+" != null")), "false"
		} else {
			nf, ns, err := g.tri(field(x, k), sub, at)
			if err != nil {
				return "", "", err
			}
			missing := "true" // a missing key reads as null
			if nilPasses(sub) {
				missing = "false"
			}
			f = or(and(has, nf), and(not(has), missing))
			s = and(has, ns)
		}
		resF = append(resF, and(passedSoFar, f))
		resS = append(resS, and(passedSoFar, s))
		passedSoFar = and(passedSoFar, not(f), not(s))
	}
	condFail := not(and(condOK...))
	anyAnchorFails := or(anchorF...)
	allSkip := "false"
	if len(condOK) == 0 && len(anchorS) > 0 {
		allSkip = and(anchorS...)
	}
	fail = or(not(isMap), and(isMap, not(condFail), or(anyAnchorFails, and(not(allSkip), or(resF...)))))
	skip = and(isMap, or(condFail, and(not(anyAnchorFails), or(allSkip, or(resS...)))))
	return fail, skip, nil
}

// listHint is the list's key in where, for naming its comprehension variable.
func listHint(where string) string {
	hint := where[strings.LastIndex(where, ".")+1:]
	if m := anchorKey.FindStringSubmatch(hint); m != nil {
		hint = m[2]
	}
	return hint
}

// and, or and not write CEL, folding the constants true and false.
func and(parts ...string) string {
	var keep []string
	for _, p := range parts {
		switch p {
		case "true":
		case "false":
			return "false"
		default:
			keep = append(keep, p)
		}
	}
	switch len(keep) {
	case 0:
		return "true"
	case 1:
		return keep[0]
	}
	return "(" + strings.Join(keep, " && ") + ")"
}

func or(parts ...string) string {
	var keep []string
	for _, p := range parts {
		switch p {
		case "false":
		case "true":
			return "true"
		default:
			keep = append(keep, p)
		}
	}
	switch len(keep) {
	case 0:
		return "false"
	case 1:
		return keep[0]
	}
	return "(" + strings.Join(keep, " || ") + ")"
}

func not(p string) string {
	switch p {
	case "true":
		return "false"
	case "false":
		return "true"
	}
	return "!(" + p + ")"
}
