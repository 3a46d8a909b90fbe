package tocel

import (
	"fmt"
	"regexp"
	"strings"
)

// Conditions (validate.deny.conditions, foreach deny, preconditions) are JMESPath, evaluated by
// Kyverno's operator handlers with their own typing (wildcards both ways, durations and
// quantities). Only forms whose meaning is certain are converted:
//
//   - "<literal name> AllIn|AnyIn|AllNotIn|AnyNotIn {{ element.keys(@)[] }}" in a foreach deny: is
//     the name a key of the element. Kyverno matches the name and each key as wildcards both
//     ways; the name must hold no wildcard, and the keys of a Kubernetes object are schema field
//     names, which hold none either, so this is key membership;
//   - preconditions on "{{ request.operation || 'BACKGROUND' }}" against literal operations,
//     which become the resourceRules' operations (and, when CREATE is excluded, background
//     evaluation off: Kyverno's background scans evaluate request.operation as CREATE, so the
//     'BACKGROUND' default never applies there).
//
// Everything else, request.object paths included (a missing field's null meets each operator
// differently), is refused.

var (
	elementKeys  = regexp.MustCompile(`^\{\{\s*(element\.keys\(@\)(\[\])?|keys\(element\))\s*\}\}$`)
	jmesFunction = regexp.MustCompile(`\{\{[^}]*?\b([a-z_][a-z0-9_]*)\(`)
	operationOr  = regexp.MustCompile(`^\{\{\s*request\.operation\s*\|\|\s*'BACKGROUND'\s*\}\}$`)
)

// condList returns a conditions block as its any and all lists (a bare list is all).
func condList(where string, block any) (anyC, allC []any, err error) {
	switch b := block.(type) {
	case nil:
		return nil, nil, nil
	case []any:
		return nil, b, nil
	case map[string]any:
		for _, k := range sortedKeys(b) {
			v := b[k]
			l, ok := v.([]any)
			if !ok && v != nil {
				return nil, nil, refuse(where+"."+k, "expected a list of conditions")
			}
			switch k {
			case "any":
				anyC = l
			case "all":
				allC = l
			default:
				return nil, nil, refuse(where+"."+k, "%s is not converted", k)
			}
		}
		return anyC, allC, nil
	default:
		return nil, nil, refuse(where, "conditions of type %T are not converted", block)
	}
}

// denyCEL is the CEL that is true when Kyverno would deny: every all condition holds and, if
// there are any conditions, one of them holds. No conditions deny always.
func denyCEL(where string, block any) (string, error) {
	anyC, allC, err := condList(where, block)
	if err != nil {
		return "", err
	}
	var parts []string
	if len(allC) > 0 {
		var all []string
		for i, c := range allC {
			s, err := elementCondition(fmt.Sprintf("%s.all[%d]", where, i), c)
			if err != nil {
				return "", err
			}
			all = append(all, s)
		}
		parts = append(parts, strings.Join(all, " && "))
	}
	if len(anyC) > 0 {
		var alts []string
		for i, c := range anyC {
			s, err := elementCondition(fmt.Sprintf("%s.any[%d]", where, i), c)
			if err != nil {
				return "", err
			}
			alts = append(alts, s)
		}
		parts = append(parts, "("+strings.Join(alts, " || ")+")")
	}
	if len(parts) == 0 {
		return "true", nil
	}
	return strings.Join(parts, " && "), nil
}

// elementCondition converts one condition of a foreach deny.
func elementCondition(where string, c any) (string, error) {
	key, op, value, err := splitCondition(where, c)
	if err != nil {
		return "", err
	}
	ks, kok := key.(string)
	vs, vok := value.(string)
	if !kok || !vok || !elementKeys.MatchString(strings.TrimSpace(vs)) {
		for _, operand := range []any{key, value} {
			if s, ok := operand.(string); ok {
				if m := jmesFunction.FindStringSubmatch(s); m != nil && m[1] != "keys" {
					return "", refuse(where, "JMESPath function %s in %q is not converted", m[1], s)
				}
			}
		}
		return "", refuse(where, "condition %v %s %v: JMESPath beyond element.keys(@) is not converted", key, op, value)
	}
	if strings.Contains(ks, "{{") || strings.ContainsAny(ks, "*?") {
		return "", refuse(where, "key %q: variables and wildcards are not converted", ks)
	}
	in := "(type(element) == map && " + quote(ks) + " in element)"
	switch op {
	case "AllIn", "AnyIn":
		return in, nil
	case "AllNotIn", "AnyNotIn":
		return "!" + in, nil
	}
	return "", refuse(where, "operator %s is not converted", op)
}

func splitCondition(where string, c any) (key any, op string, value any, err error) {
	m, ok := c.(map[string]any)
	if !ok {
		return nil, "", nil, refuse(where, "a condition must be a map")
	}
	for _, k := range sortedKeys(m) {
		if k != "key" && k != "operator" && k != "value" && k != "message" {
			return nil, "", nil, refuse(where+"."+k, "%s is not converted", k)
		}
	}
	op, _ = m["operator"].(string)
	return m["key"], op, m["value"], nil
}

// legacyOperations are the operations a legacy precondition on request.operation can see (a
// background scan's is CREATE).
var legacyOperations = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}

// preconditionOps reads preconditions made only of all conditions on
// "{{ request.operation || 'BACKGROUND' }}" and returns the operations they let through.
func preconditionOps(where string, block any) ([]string, error) {
	anyC, allC, err := condList(where, block)
	if err != nil {
		return nil, err
	}
	if len(anyC) > 1 {
		return nil, refuse(where+".any", "several any preconditions are not converted")
	}
	allowed := map[string]bool{}
	for _, o := range legacyOperations {
		allowed[o] = true
	}
	for i, c := range append(allC, anyC...) {
		at := fmt.Sprintf("%s[%d]", where, i)
		key, op, value, err := splitCondition(at, c)
		if err != nil {
			return nil, err
		}
		ks, _ := key.(string)
		if !operationOr.MatchString(strings.TrimSpace(ks)) {
			return nil, refuse(at, "precondition on %v is not converted (JMESPath function or path beyond request.operation)", key)
		}
		var values []string
		_, scalar := value.(string)
		if scalar != (op == "Equals" || op == "NotEquals") {
			return nil, refuse(at, "operator %s with value %v is not converted", op, value)
		}
		switch v := value.(type) {
		case string:
			values = []string{v}
		case []any:
			if values, err = stringList(at+".value", v); err != nil {
				return nil, err
			}
		default:
			return nil, refuse(at+".value", "value %v is not converted", value)
		}
		for _, v := range values {
			if strings.ContainsAny(v, "*?{") {
				return nil, refuse(at+".value", "value %q is not converted", v)
			}
		}
		in := func(o string) bool {
			for _, v := range values {
				if v == o {
					return true
				}
			}
			return false
		}
		for _, o := range legacyOperations {
			var keep bool
			switch {
			case op == "Equals" || op == "AnyIn" || op == "AllIn":
				keep = in(o)
			case op == "NotEquals" || op == "AnyNotIn" || op == "AllNotIn":
				keep = !in(o)
			default:
				return nil, refuse(at, "operator %s on request.operation is not converted", op)
			}
			allowed[o] = allowed[o] && keep
		}
	}
	var out []string
	for _, o := range legacyOperations {
		if allowed[o] {
			out = append(out, o)
		}
	}
	return out, nil
}
