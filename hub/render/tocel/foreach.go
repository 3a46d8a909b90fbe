package tocel

import (
	"fmt"
	"regexp"
	"strings"
)

// validate.foreach: each entry names a list in the resource and a pattern, anyPattern or deny
// checked against every element (bound to `element`, as Kyverno binds it). Kyverno skips an
// entry whose list is missing and null elements; the rule passes when every entry passes. So:
//
//	!(has(object.spec) && type(object.spec) == map && has(object.spec.initContainers)) ||
//	  (type(object.spec.initContainers) == list ? object.spec.initContainers :
//	    [object.spec.initContainers]).all(element, element == null || <check>)
//
// (Kyverno reads a value that is not a list as a one-element list, and checks a pattern against
// the whole resource for an element that is not a non-empty map.) One difference: a resource
// whose lists are all missing or empty passes here where Kyverno reports skip (a
// ValidatingPolicy has no skip). On DELETE, request.object is null and Kyverno skips every
// entry; the converted policy does not match DELETE for foreach rules.

var listPath = regexp.MustCompile(`^request\.object((\.[A-Za-z_][A-Za-z0-9_]*)+)(\[\])?$`)

// foreachKeys are the keys of a foreach entry the converter reads.
var foreachKeys = map[string]bool{"list": true, "pattern": true, "anyPattern": true, "deny": true}

// foreachCEL is the CEL for a whole validate.foreach over the resource at root (object, or
// oldObject for Kyverno's allowExistingViolations).
func foreachCEL(where, root string, entries any, names *namer) (string, error) {
	list, ok := entries.([]any)
	if !ok || len(list) == 0 {
		return "", refuse(where, "expected a non-empty list")
	}
	var parts []string
	for i, e := range list {
		at := fmt.Sprintf("%s[%d]", where, i)
		s, err := foreachEntry(at, root, e, names)
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " && "), nil
}

func foreachEntry(where, root string, e any, names *namer) (string, error) {
	m, ok := e.(map[string]any)
	if !ok {
		return "", refuse(where, "expected a map")
	}
	for _, k := range sortedKeys(m) {
		if !foreachKeys[k] {
			return "", refuse(where+"."+k, "foreach %s is not converted", k)
		}
	}
	ls, _ := m["list"].(string)
	match := listPath.FindStringSubmatch(strings.TrimSpace(ls))
	if match == nil {
		return "", refuse(where+".list", "list %q is not converted (only request.object.<field>...)", ls)
	}
	segs := strings.Split(strings.TrimPrefix(match[1], "."), ".")
	guard, x := "", root
	if root != "object" { // oldObject is null on CREATE
		guard = "type(" + root + ") == map"
	}
	for i, s := range segs {
		if !selectable(s) {
			return "", refuse(where+".list", "list %q is not converted", ls)
		}
		step := present(x, s)
		if i > 0 {
			step = "type(" + x + ") == map && " + step
		}
		if guard == "" {
			guard = step
		} else {
			guard += " && " + step
		}
		x = field(x, s)
	}

	var check string
	var err error
	switch {
	case m["pattern"] != nil || m["anyPattern"] != nil:
		check, err = scopedPattern(where, root, m, names)
	case m["deny"] != nil:
		d, _ := m["deny"].(map[string]any)
		var deny string
		deny, err = denyCEL(where+".deny.conditions", d["conditions"])
		check = "!(" + deny + ")"
	default:
		return "", refuse(where, "foreach without pattern, anyPattern or deny is not converted")
	}
	if err != nil {
		return "", err
	}
	// Kyverno reads a value that is not a list as a list of that one value.
	return fmt.Sprintf("(!(%s) || (type(%s) == list ? %s : [%s]).all(element, element == null || %s))", guard, x, x, x, check), nil
}

// scopedPattern is a foreach pattern or anyPattern as Kyverno applies it: to the element when
// the element is a non-empty map, and otherwise (a string, a number, {}) to the whole resource,
// as Kyverno's element scope is off for such elements.
func scopedPattern(where, root string, m map[string]any, names *namer) (string, error) {
	build := func(x string) (string, error) {
		if m["pattern"] != nil {
			g := &patternGen{names: names}
			return g.notFail(x, m["pattern"], where+".pattern")
		}
		return anyPatternCEL(where+".anyPattern", x, m["anyPattern"], names)
	}
	onElement, err := build("element")
	if err != nil {
		return "", err
	}
	onResource, err := build(root)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("(type(element) == map && size(element) > 0 ? (%s) : (%s))", onElement, onResource), nil
}

// anyPatternCEL is the CEL for an anyPattern: the value matches one of the patterns.
func anyPatternCEL(where, x string, pats any, names *namer) (string, error) {
	list, ok := pats.([]any)
	if !ok || len(list) == 0 {
		return "", refuse(where, "expected a non-empty list of patterns")
	}
	if hasCondition(pats) {
		// Kyverno: passes when one pattern passes, fails when none does and one fails.
		var fails, notPass []string
		for i, p := range list {
			g := &patternGen{names: names}
			f, s, err := g.tri(x, p, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return "", err
			}
			fails, notPass = append(fails, f), append(notPass, or(f, s))
		}
		return not(and(and(notPass...), or(fails...))), nil
	}
	var alts []string
	for i, p := range list {
		g := &patternGen{names: names}
		s, err := g.pattern(x, p, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return "", err
		}
		alts = append(alts, "("+s+")")
	}
	return strings.Join(alts, " || "), nil
}
