package tocel

import (
	"errors"
	"fmt"
	"strings"
)

// Report says, for one legacy policy, what was converted and what was refused, rule by rule.
type Report struct {
	// Policy is the legacy policy's kind and name, e.g. "ClusterPolicy/require-labels".
	Policy string
	// Refusals are policy-level reasons (spec fields, rules that cannot share one policy).
	Refusals []string
	// Notes are policy-level facts a reviewer should know (e.g. autogen controllers dropped).
	Notes []string
	Rules []RuleReport
}

// RuleReport is the outcome for one legacy rule.
type RuleReport struct {
	Name string
	// Converted lists what became CEL: "pattern", "anyPattern", "foreach", "deny", "preconditions".
	Converted []string
	// Refusals say why the rule was not converted; empty when it was.
	Refusals []string
	// Notes are facts about an accepted conversion (e.g. a message's line breaks were joined).
	Notes []string
}

// Refused reports whether anything in the policy was refused; a refused policy is not emitted.
func (r Report) Refused() bool {
	if len(r.Refusals) > 0 {
		return true
	}
	for _, rule := range r.Rules {
		if len(rule.Refusals) > 0 {
			return true
		}
	}
	return false
}

// Reasons lists every refusal, each prefixed with where it applies ("rule X: ...").
func (r Report) Reasons() []string {
	out := append([]string(nil), r.Refusals...)
	for _, rule := range r.Rules {
		for _, reason := range rule.Refusals {
			out = append(out, "rule "+rule.Name+": "+reason)
		}
	}
	return out
}

// String renders the report for a human, one line per fact.
func (r Report) String() string {
	var b strings.Builder
	verdict := "converted"
	if r.Refused() {
		verdict = "refused"
	}
	fmt.Fprintf(&b, "%s: %s\n", r.Policy, verdict)
	for _, s := range r.Refusals {
		fmt.Fprintf(&b, "  refused: %s\n", s)
	}
	for _, s := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", s)
	}
	for _, rule := range r.Rules {
		if len(rule.Refusals) > 0 {
			for _, s := range rule.Refusals {
				fmt.Fprintf(&b, "  rule %s: refused: %s\n", rule.Name, s)
			}
		} else {
			fmt.Fprintf(&b, "  rule %s: converted %s\n", rule.Name, strings.Join(rule.Converted, ", "))
		}
		for _, s := range rule.Notes {
			fmt.Fprintf(&b, "  rule %s: note: %s\n", rule.Name, s)
		}
	}
	return b.String()
}

// refusal is a construct the converter will not translate; where says which part of the rule.
type refusal struct {
	where, what string
}

func (e *refusal) Error() string {
	if e.where == "" {
		return e.what
	}
	return e.where + ": " + e.what
}

// refuse builds a refusal; where is a path in the rule such as "validate.pattern.spec.x".
func refuse(where, format string, args ...any) error {
	return &refusal{where: where, what: fmt.Sprintf(format, args...)}
}

// reason turns an error into the report's text: refusals as they are, anything else wrapped.
func reason(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.Error()
	}
	return err.Error()
}
