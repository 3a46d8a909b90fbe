package tocel

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Kyverno's validate.pattern, written as one CEL expression that is true exactly when Kyverno's
// pattern matcher (pkg/engine/validate) passes the value:
//
//   - a map pattern needs a map; each plain key is checked against the resource's value for it
//     (a missing key is checked as null, which fails every pattern but null); "key: '*'" needs
//     the key present and not null; =(key) checks only when the key is present; X(key) needs
//     the key absent;
//   - a list pattern needs a list and applies its single element to every element;
//   - a scalar pattern against a list applies to every element of it.
//
// Every step is guarded by type(), so an expression never errors on a resource of another shape.
// Condition (), global ^(), existence <() and add +() anchors, which can skip a rule, are refused.

var anchorKey = regexp.MustCompile(`^([+<=X^]?)\((.+)\)$`)

// patternGen writes one expression; names keeps comprehension variables distinct in it.
type patternGen struct {
	names *namer
}

// pattern is the CEL for "value x matches pat"; where locates pat for refusals.
func (g *patternGen) pattern(x string, pat any, where string) (string, error) {
	switch p := pat.(type) {
	case map[string]any:
		return g.mapPattern(x, p, where)
	case []any:
		return g.listPattern(x, p, where)
	default:
		s, err := g.scalar(where, x, pat)
		if err != nil {
			return "", err
		}
		v := g.names.name("item")
		elem, err := g.scalar(where, v, pat)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("(type(%s) == list ? %s.all(%s, %s) : %s)", x, x, v, elem, s), nil
	}
}

func (g *patternGen) mapPattern(x string, p map[string]any, where string) (string, error) {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{}
	if x != "object" { // object is always a map
		parts = append(parts, "type("+x+") == map")
	}
	for _, k := range keys {
		sub := p[k]
		at := where + "." + k
		if m := anchorKey.FindStringSubmatch(k); m != nil {
			key := m[2]
			switch m[1] {
			case "=":
				c, err := g.pattern(field(x, key), sub, at)
				if err != nil {
					return "", err
				}
				parts = append(parts, "(!"+present(x, key)+" || "+c+")")
			case "X":
				parts = append(parts, "!"+present(x, key))
			case "":
				return "", refuse(at, "condition anchor (%s) is not converted", key)
			case "^":
				return "", refuse(at, "global anchor ^(%s) is not converted", key)
			case "<":
				return "", refuse(at, "existence anchor <(%s) is not converted", key)
			default:
				return "", refuse(at, "anchor %s(%s) is not converted", m[1], key)
			}
			continue
		}
		if strings.Contains(k, "{{") {
			return "", refuse(at, "variable %q in a pattern key is not converted", k)
		}
		if strings.ContainsAny(k, "*?") {
			return "", refuse(at, "wildcard key %q is not converted", k)
		}
		if sub == "*" {
			parts = append(parts, present(x, k)+" && "+field(x, k)+" != null")
			continue
		}
		c, err := g.pattern(field(x, k), sub, at)
		if err != nil {
			return "", err
		}
		if nilPasses(sub) {
			// Kyverno reads a missing key as null, which this pattern accepts.
			parts = append(parts, "(!"+present(x, k)+" || "+c+")")
		} else {
			parts = append(parts, present(x, k)+" && "+c)
		}
	}
	if len(parts) == 0 {
		return "true", nil
	}
	return strings.Join(parts, " && "), nil
}

func (g *patternGen) listPattern(x string, p []any, where string) (string, error) {
	switch {
	case len(p) == 0:
		return "", refuse(where, "an empty list pattern is not converted")
	case len(p) > 1:
		return "", refuse(where, "a list pattern with %d elements is not converted (only one element, applied to every item)", len(p))
	}
	if _, ok := p[0].([]any); ok {
		return "", refuse(where, "a list of lists pattern is not converted")
	}
	hint := where[strings.LastIndex(where, ".")+1:]
	if m := anchorKey.FindStringSubmatch(hint); m != nil {
		hint = m[2]
	}
	v := g.names.name(hint)
	var elem string
	var err error
	if m, ok := p[0].(map[string]any); ok {
		elem, err = g.mapPattern(v, m, where+"[]")
	} else {
		elem, err = g.scalar(where+"[]", v, p[0])
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("type(%s) == list && %s.all(%s, %s)", x, x, v, elem), nil
}

// nilPasses reports whether Kyverno's pattern.Validate accepts a missing (null) value: a null
// pattern does, and a string pattern whose comparisons hold for 0.
func nilPasses(pat any) bool {
	switch p := pat.(type) {
	case nil:
		return true
	case string:
		sp, err := parseStringPattern("", p)
		return err == nil && sp.onNull()
	}
	return false
}

// scalar is the CEL for Kyverno's pattern.Validate(x, pat) with a scalar pat; x is not a list.
func (g *patternGen) scalar(where, x string, pat any) (string, error) {
	switch p := pat.(type) {
	case nil:
		return fmt.Sprintf("(%s == null || (type(%s) == int && %s == 0) || (type(%s) == double && %s == 0.0) || (type(%s) == string && %s == '') || (type(%s) == bool && !%s))",
			x, x, x, x, x, x, x, x, x), nil
	case bool:
		if p {
			return fmt.Sprintf("(type(%s) == bool && %s)", x, x), nil
		}
		return fmt.Sprintf("(type(%s) == bool && !%s)", x, x), nil
	case int64, int:
		n := fmt.Sprint(p)
		return fmt.Sprintf("((type(%s) == int && %s == %s) || (type(%s) == double && %s == %s.0) || (type(%s) == string && %s.matches('^[+-]?[0-9]{1,18}$') && int(%s) == %s))",
			x, x, n, x, x, n, x, x, x, n), nil
	case string:
		if strings.Contains(p, "{{") {
			return "", refuse(where, "variable %q in a pattern is not converted", p)
		}
		if strings.Contains(p, "$(") {
			return "", refuse(where, "reference %q in a pattern is not converted", p)
		}
		sp, err := parseStringPattern(where, p)
		if err != nil {
			return "", err
		}
		return sp.check(where, x)
	default:
		return "", refuse(where, "pattern value %v (%T) is not converted", pat, pat)
	}
}
