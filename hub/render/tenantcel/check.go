package tenantcel

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
)

// MaxExpressionLength bounds an expression, in code points, before it is parsed: far above what
// a condition or a validation needs, far below what could cost the hub.
const MaxExpressionLength = 16 << 10

// Refusal is an expression a tenant may not write: Field is where it is (e.g.
// spec.resources.matchConditions[0].expression), What is what it does (calls http.Get, reads
// params, is not CEL ...).
type Refusal struct {
	Field, What string
	// Function is the function or variable refused; empty when the expression does not parse.
	Function string
}

func (r *Refusal) Error() string {
	if r.Function == "" {
		return r.Field + ": " + r.What
	}
	return r.Field + ": " + r.What + ", which a tenant's CEL may not (allowed: " + Allowed + ")"
}

// Check parses expression (field says where it is written, for the message) and returns a
// *Refusal unless it parses and every call and identifier in it is on the allow-list.
func Check(field, expression string) error {
	if n := len([]rune(expression)); n > MaxExpressionLength {
		return &Refusal{Field: field, What: fmt.Sprintf("is %d characters long, beyond the %d a tenant's expression may have", n, MaxExpressionLength)}
	}
	env, err := parserEnv()
	if err != nil {
		return fmt.Errorf("%s: build the CEL parser: %w", field, err)
	}
	parsed, issues := env.Parse(expression)
	if issues != nil && issues.Err() != nil {
		return &Refusal{Field: field, What: "is not CEL the hub can parse: " + oneLine(issues.Err().Error())}
	}
	w := &walker{field: field, bound: map[string]int{}}
	return w.expr(parsed.NativeRep().Expr())
}

// parserEnv parses as Kyverno's CEL environments do, with the same macros (cel.bind, sortBy,
// math.greatest, the optional and two-variable forms), so that what is checked is the tree
// Kyverno evaluates. It is built once: an immutable parser, like a compiled regexp.
var parserEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.OptionalTypes(),
		ext.Bindings(),
		ext.Lists(ext.ListsVersion(3)),
		ext.Math(),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.Encoders(),
		ext.TwoVarComprehensions(),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	)
})

// walker walks a parsed expression; bound counts the comprehension variables in scope.
type walker struct {
	field string
	bound map[string]int
}

func (w *walker) refuse(what, name string) error {
	return &Refusal{Field: w.field, What: what + " " + name, Function: name}
}

func (w *walker) expr(e celast.Expr) error {
	switch e.Kind() {
	case celast.LiteralKind:
		return nil
	case celast.IdentKind:
		name := e.AsIdent()
		if w.bound[name] > 0 || variables[name] || typeNames[name] {
			return nil
		}
		return w.refuse("reads", name)
	case celast.SelectKind:
		return w.expr(e.AsSelect().Operand())
	case celast.ListKind:
		return w.all(e.AsList().Elements())
	case celast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			if entry.Kind() != celast.MapEntryKind {
				return w.refuse("holds an entry of kind", fmt.Sprint(entry.Kind()))
			}
			m := entry.AsMapEntry()
			if err := w.expr(m.Key()); err != nil {
				return err
			}
			if err := w.expr(m.Value()); err != nil {
				return err
			}
		}
		return nil
	case celast.StructKind:
		return w.refuse("builds a message of type", e.AsStruct().TypeName())
	case celast.ComprehensionKind:
		return w.comprehension(e.AsComprehension())
	case celast.CallKind:
		return w.call(e.AsCall())
	}
	return w.refuse("holds an expression of kind", fmt.Sprint(e.Kind()))
}

func (w *walker) all(exprs []celast.Expr) error {
	for _, e := range exprs {
		if err := w.expr(e); err != nil {
			return err
		}
	}
	return nil
}

// comprehension checks a macro's expansion: the range and the initial value in the enclosing
// scope, the loop with its variables bound, the result with the accumulator bound.
func (w *walker) comprehension(c celast.ComprehensionExpr) error {
	if err := w.expr(c.IterRange()); err != nil {
		return err
	}
	if err := w.expr(c.AccuInit()); err != nil {
		return err
	}
	loopVars := []string{c.IterVar(), c.AccuVar()}
	if c.HasIterVar2() {
		loopVars = append(loopVars, c.IterVar2())
	}
	w.bind(loopVars...)
	err := w.expr(c.LoopCondition())
	if err == nil {
		err = w.expr(c.LoopStep())
	}
	w.unbind(loopVars...)
	if err != nil {
		return err
	}
	w.bind(c.AccuVar())
	defer w.unbind(c.AccuVar())
	return w.expr(c.Result())
}

func (w *walker) bind(names ...string) {
	for _, n := range names {
		w.bound[n]++
	}
}

func (w *walker) unbind(names ...string) {
	for _, n := range names {
		w.bound[n]--
	}
}

// call checks a function call. A member call on an identifier (math.ceil(x), http.Get(u)) is
// first a namespaced function, as CEL's type checker resolves it; else it is a member function
// of a value, the value checked first (an unknown identifier names the call it makes).
func (w *walker) call(c celast.CallExpr) error {
	fn := c.FunctionName()
	if !c.IsMemberFunction() {
		if !globalFunctions[fn] {
			return w.refuse("calls", fn)
		}
		return w.all(c.Args())
	}
	target := c.Target()
	qualified, isName := qualifiedName(target)
	if isName {
		if globalFunctions[qualified+"."+fn] {
			return w.all(c.Args())
		}
		root, _, _ := strings.Cut(qualified, ".")
		if w.bound[root] == 0 && !variables[root] && !memberFunctions[fn] {
			return w.refuse("calls", qualified+"."+fn)
		}
	}
	if err := w.expr(target); err != nil {
		return err
	}
	if !memberFunctions[fn] {
		if isName {
			return w.refuse("calls", qualified+"."+fn)
		}
		return w.refuse("calls", fn)
	}
	return w.all(c.Args())
}

// qualifiedName is a.b.c for an identifier and the fields selected from it, as CEL's checker
// reads a namespaced function's prefix.
func qualifiedName(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent(), true
	case celast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", false
		}
		prefix, ok := qualifiedName(s.Operand())
		if !ok {
			return "", false
		}
		return prefix + "." + s.FieldName(), true
	}
	return "", false
}

// oneLine folds the parser's multi-line report (it points at the column) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
