package tocel

import (
	"fmt"
	"sort"
	"strings"
)

// convertedRule is one legacy rule in CEL form, before rules are joined into a policy.
type convertedRule struct {
	match      match
	operations []string // resourceRules operations
	background bool     // false when the legacy rule skipped background scans
	action     string   // Enforce or Audit
	validation map[string]any
}

// ruleKeys are the keys of a legacy rule the converter reads (others are refused).
var ruleKeys = map[string]bool{"name": true, "match": true, "exclude": true, "validate": true, "preconditions": true, "skipBackgroundRequests": true}

// validateKeys are the keys of validate the converter reads.
var validateKeys = map[string]bool{
	"message": true, "pattern": true, "anyPattern": true, "deny": true, "foreach": true,
	"failureAction": true, "allowExistingViolations": true,
}

// admissionOperations are the operations a legacy rule without match operations sees.
var admissionOperations = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}

// convertRule converts one rule; specAction is the policy's validationFailureAction.
func convertRule(rule map[string]any, specAction string) (convertedRule, RuleReport, error) {
	name, _ := rule["name"].(string)
	rep := RuleReport{Name: name}
	cr := convertedRule{background: true}
	for _, k := range sortedKeys(rule) {
		if !ruleKeys[k] {
			switch k {
			case "context":
				return cr, rep, refuse(k, "%s is not converted", contextKinds(rule[k]))
			case "mutate", "generate", "verifyImages":
				return cr, rep, refuse(k, "%s rules are not converted (validate only)", k)
			default:
				return cr, rep, refuse(k, "%s is not converted", k)
			}
		}
	}
	v, ok := rule["validate"].(map[string]any)
	if !ok {
		return cr, rep, refuse("", "not a validate rule")
	}
	for _, k := range sortedKeys(v) {
		if !validateKeys[k] {
			return cr, rep, refuse("validate."+k, "%s is not converted", k)
		}
	}

	action := specAction
	if a, ok := v["failureAction"].(string); ok {
		action = a
	}
	allowExisting := true // Kyverno's default
	if allow, ok := v["allowExistingViolations"].(bool); ok {
		allowExisting = allow
	}
	switch strings.ToLower(action) {
	case "enforce":
		cr.action = "Enforce"
	case "audit", "":
		cr.action = "Audit"
	default:
		return cr, rep, refuse("validate.failureAction", "unknown action %q", action)
	}

	m, err := convertMatch(rule)
	if err != nil {
		return cr, rep, err
	}
	cr.match = m

	allowed := append([]string(nil), legacyOperations...)
	if rule["preconditions"] != nil {
		if allowed, err = preconditionOps("preconditions", rule["preconditions"]); err != nil {
			return cr, rep, err
		}
		rep.Converted = append(rep.Converted, "preconditions")
	}
	base := admissionOperations
	if m.operations != nil {
		base = m.operations
	}
	isDeny := v["deny"] != nil
	for _, o := range base {
		switch {
		case !contains(allowed, o):
		case o == "CONNECT":
			// no kind in the table is matched by a CONNECT (only subresources are)
		case o == "DELETE" && !isDeny:
			// Kyverno skips pattern and foreach rules on DELETE (nothing to validate)
		default:
			cr.operations = append(cr.operations, o)
		}
	}
	if len(cr.operations) == 0 {
		return cr, rep, refuse("preconditions", "no admission operation is left to match")
	}
	// Kyverno's background scans evaluate a rule with request.operation CREATE (seen with
	// Kyverno 1.19 on the local fleet: require-probes' "{{request.operation || 'BACKGROUND'}}"
	// AnyIn [CREATE, UPDATE] reports pass and fail from the background scan): a rule whose
	// preconditions let CREATE through is scanned in background, one that excludes it is not.
	if !contains(allowed, "CREATE") {
		cr.background = false
		rep.Notes = append(rep.Notes, "the legacy rule skipped background scans (its request.operation precondition excludes CREATE, the operation Kyverno's background scans evaluate): background evaluation is off")
	}

	msg, _ := v["message"].(string)
	if strings.Contains(msg, "{{") {
		return cr, rep, refuse("validate.message", "variables in the message are not converted")
	}
	if strings.ContainsAny(msg, "\r\n") {
		msg = strings.Join(strings.Fields(msg), " ")
		rep.Notes = append(rep.Notes, "the message's line breaks were joined (a ValidatingPolicy message is one line)")
	}
	if msg == "" {
		msg = fmt.Sprintf("validation error: rule %s failed", name)
	}

	names := newNamer()
	expr, what, err := validationCEL(v, "object", names)
	if err != nil {
		return cr, rep, err
	}
	rep.Converted = append(rep.Converted, what)
	if strings.Contains(expr, "isQuantity(") {
		rep.Notes = append(rep.Notes, "a comparison with a non-integer number uses its value; Kyverno compares its 6-decimal text, so a number within 0.0000005 of the bound may differ")
	}
	if what == "foreach" {
		rep.Notes = append(rep.Notes, "a resource whose foreach lists are all missing or empty passes (legacy: skip)")
	}
	if cr.action == "Enforce" && allowExisting {
		// Kyverno lets an UPDATE through when the old object fails the rule too.
		old, _, err := validationCEL(v, "oldObject", names)
		if err != nil {
			return cr, rep, err
		}
		expr = "(" + expr + ") || (oldObject != null && request.operation == 'UPDATE' && !(" + old + "))"
		rep.Notes = append(rep.Notes, "Enforce with allowExistingViolations: an UPDATE passes when the old object fails too, as in Kyverno")
	}
	cr.validation = map[string]any{"expression": expr, "message": msg}
	sort.Strings(rep.Converted)
	return cr, rep, nil
}

// validationCEL is the CEL for the rule's check of the resource at root (object, or oldObject
// for Kyverno's allowExistingViolations) and what it converted.
func validationCEL(v map[string]any, root string, names *namer) (string, string, error) {
	switch {
	case v["pattern"] != nil:
		g := &patternGen{names: names}
		expr, err := g.notFail(root, v["pattern"], "validate.pattern")
		return expr, "pattern", err
	case v["anyPattern"] != nil:
		expr, err := anyPatternCEL("validate.anyPattern", root, v["anyPattern"], names)
		return expr, "anyPattern", err
	case v["foreach"] != nil:
		expr, err := foreachCEL("validate.foreach", root, v["foreach"], names)
		return expr, "foreach", err
	case v["deny"] != nil:
		d, _ := v["deny"].(map[string]any)
		deny, err := denyCEL("validate.deny.conditions", d["conditions"])
		if deny == "true" {
			return "false", "deny", err
		}
		return "!(" + deny + ")", "deny", err
	}
	return "", "", refuse("validate", "no pattern, anyPattern, foreach or deny")
}

// contextKinds names a rule's context entries for the report: "context apiCall podCount, configMap cm".
func contextKinds(ctx any) string {
	entries, _ := ctx.([]any)
	var parts []string
	for _, e := range entries {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		for _, k := range sortedKeys(m) {
			if k != "name" {
				parts = append(parts, k+" "+name)
			}
		}
	}
	if len(parts) == 0 {
		return "context"
	}
	return "context " + strings.Join(parts, ", ")
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
