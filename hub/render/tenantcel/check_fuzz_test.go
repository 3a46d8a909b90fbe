package tenantcel

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
)

// FuzzCheck: Check never panics, and what it accepts holds, in the tree Kyverno evaluates (the
// expression parsed with the macros of Kyverno's CEL environments expanded, independent of
// Check's parser and walk), no call outside the allow-list, no free identifier but the request's
// variables and the type names, and no message built.
func FuzzCheck(f *testing.F) {
	for _, e := range accepted {
		f.Add(e)
	}
	for _, tc := range refused {
		f.Add(tc.expression)
	}
	kyvernoParser, err := cel.NewEnv(cel.OptionalTypes(), ext.Bindings(), ext.Lists(ext.ListsVersion(3)), ext.Math(),
		ext.Strings(ext.StringsVersion(2)), ext.Sets(), ext.Encoders(), ext.TwoVarComprehensions())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expression string) {
		if Check("f", expression) != nil {
			return
		}
		parsed, issues := kyvernoParser.Parse(expression)
		if issues != nil && issues.Err() != nil {
			return // Kyverno would refuse it too
		}
		root := celast.NavigateAST(parsed.NativeRep())
		for _, call := range celast.MatchDescendants(root, celast.KindMatcher(celast.CallKind)) {
			c := call.AsCall()
			fn := c.FunctionName()
			if globalFunctions[fn] || expansions[fn] || (c.IsMemberFunction() && memberFunctions[fn]) {
				continue
			}
			if c.IsMemberFunction() {
				if q, ok := qualifiedName(c.Target()); ok && globalFunctions[q+"."+fn] {
					continue
				}
			}
			t.Fatalf("%q accepted, yet it calls %s", expression, fn)
		}
		for _, ident := range celast.MatchDescendants(root, celast.KindMatcher(celast.IdentKind)) {
			name := ident.AsIdent()
			if variables[name] || typeNames[name] || boundAbove(ident, name) || namespaceOfCall(ident) {
				continue
			}
			t.Fatalf("%q accepted, yet it reads %s", expression, name)
		}
		if len(celast.MatchDescendants(root, celast.KindMatcher(celast.StructKind))) > 0 {
			t.Fatalf("%q accepted, yet it builds a message", expression)
		}
		for _, lib := range []string{"http.", "resource.", "globalContext.", "image.", "imagedata."} {
			if strings.HasPrefix(expression, lib) {
				t.Fatalf("%q accepted, yet it starts with %s", expression, lib)
			}
		}
	})
}

// expansions are the internal functions of the extensions' macros as Kyverno expands them
// (the hub's parser leaves those macros calls).
var expansions = set("cel.@mapInsert", "math.@max", "math.@min", "@sortByAssociatedKeys")

// boundAbove says whether a comprehension enclosing e declares name.
func boundAbove(e celast.NavigableExpr, name string) bool {
	for p, ok := e.Parent(); ok; p, ok = p.Parent() {
		if p.Kind() != celast.ComprehensionKind {
			continue
		}
		c := p.AsComprehension()
		if c.IterVar() == name || c.AccuVar() == name || (c.HasIterVar2() && c.IterVar2() == name) {
			return true
		}
	}
	return false
}

// namespaceOfCall says whether e is the namespace of an allowed namespaced call: math in
// math.abs(x), format in format.dns1123Label().
func namespaceOfCall(e celast.NavigableExpr) bool {
	top := e
	p, ok := top.Parent()
	for ok && p.Kind() == celast.SelectKind {
		top = p
		p, ok = top.Parent()
	}
	if !ok || p.Kind() != celast.CallKind {
		return false
	}
	c := p.AsCall()
	if !c.IsMemberFunction() || c.Target().ID() != top.ID() {
		return false
	}
	q, isName := qualifiedName(top)
	return isName && globalFunctions[q+"."+c.FunctionName()]
}
