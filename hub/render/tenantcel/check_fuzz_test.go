package tenantcel

import (
	"strings"
	"testing"

	celast "github.com/google/cel-go/common/ast"
)

// FuzzCheck: Check never panics, and what it accepts holds, by a second reading of the tree
// independent of Check's walk, no call outside the allow-list and no free identifier but the
// request's variables and the type names.
func FuzzCheck(f *testing.F) {
	for _, e := range accepted {
		f.Add(e)
	}
	for _, tc := range refused {
		f.Add(tc.expression)
	}
	f.Fuzz(func(t *testing.T, expression string) {
		if Check("f", expression) != nil {
			return
		}
		env, err := parserEnv()
		if err != nil {
			t.Fatal(err)
		}
		parsed, issues := env.Parse(expression)
		if issues != nil && issues.Err() != nil {
			t.Fatalf("%q accepted, yet it does not parse: %v", expression, issues.Err())
		}
		root := celast.NavigateAST(parsed.NativeRep())
		for _, call := range celast.MatchDescendants(root, celast.KindMatcher(celast.CallKind)) {
			c := call.AsCall()
			fn := c.FunctionName()
			if globalFunctions[fn] || (c.IsMemberFunction() && memberFunctions[fn]) {
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
