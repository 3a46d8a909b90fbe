package tenantcel

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/parser"
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
	if n := utf8.RuneCountInString(expression); n > MaxExpressionLength {
		return &Refusal{Field: field, What: fmt.Sprintf("is %d characters long, beyond the %d a tenant's expression may have", n, MaxExpressionLength)}
	}
	// CEL's parser alone: the standard macros expand as cel.NewEnv expands them, and so
	// Kyverno (has, all, exists, exists_one, map, filter; not parser.AllMacros, whose
	// two-argument existsOne Kyverno leaves a call), the macros of Kyverno's extensions stay
	// calls (binders); nothing is declared, checked or evaluated.
	p, err := parser.NewParser(
		parser.Macros(cel.StandardMacros...),
		parser.EnableOptionalSyntax(true),
		parser.ExpressionSizeCodePointLimit(MaxExpressionLength),
	)
	if err != nil {
		return fmt.Errorf("%s: build the CEL parser: %w", field, err)
	}
	parsed, errs := p.Parse(common.NewTextSource(expression))
	if len(errs.GetErrors()) > 0 {
		return &Refusal{Field: field, What: "is not CEL the hub can parse: " + oneLine(errs.ToDisplayString())}
	}
	w := &walker{field: field, bound: map[string]int{}}
	return w.expr(parsed.Expr())
}

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
	if b, ok := binderOf(c); ok {
		if c.IsMemberFunction() && b.name != "cel.bind" {
			if err := w.expr(c.Target()); err != nil {
				return err
			}
		}
		return w.binder(b, c.Args())
	}
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

// binder is a macro of Kyverno's CEL extensions, left a call by the hub's parser: its first
// names arguments are variable names, in scope from argument scopeFrom on (before it, the
// arguments are evaluated outside, as cel.bind's initial value).
type binder struct {
	name             string
	names, scopeFrom int
	// args are the numbers of arguments the macro takes.
	args []int
}

// binders, by the function name the parser gives them (cel.bind by its qualified name).
var binders = map[string]binder{
	"cel.bind":          {"cel.bind", 1, 2, []int{3}},
	"sortBy":            {"sortBy", 1, 1, []int{2}},
	"optMap":            {"optMap", 1, 1, []int{2}},
	"optFlatMap":        {"optFlatMap", 1, 1, []int{2}},
	"all":               {"all", 2, 2, []int{3}},
	"exists":            {"exists", 2, 2, []int{3}},
	"exists_one":        {"exists_one", 2, 2, []int{3}},
	"existsOne":         {"existsOne", 2, 2, []int{3}},
	"transformList":     {"transformList", 2, 2, []int{3, 4}},
	"transformMap":      {"transformMap", 2, 2, []int{3, 4}},
	"transformMapEntry": {"transformMapEntry", 2, 2, []int{3, 4}},
}

// binderOf is the binder a call is, if any: a member call (cel.bind: on the identifier cel) with
// one of the macro's numbers of arguments.
func binderOf(c celast.CallExpr) (binder, bool) {
	if !c.IsMemberFunction() {
		return binder{}, false
	}
	name := c.FunctionName()
	if t := c.Target(); t.Kind() == celast.IdentKind && t.AsIdent() == "cel" {
		name = "cel." + name
	}
	b, ok := binders[name]
	if !ok || !slices.Contains(b.args, len(c.Args())) {
		return binder{}, false
	}
	return b, true
}

// binder checks a binder's arguments: names first, then the arguments outside their scope,
// then those inside it.
func (w *walker) binder(b binder, args []celast.Expr) error {
	names := make([]string, 0, b.names)
	for _, a := range args[:b.names] {
		if a.Kind() != celast.IdentKind {
			return &Refusal{Field: w.field, What: "is not CEL the hub can parse: " + b.name + " takes variable names first"}
		}
		names = append(names, a.AsIdent())
	}
	if err := w.all(args[b.names:b.scopeFrom]); err != nil {
		return err
	}
	w.bind(names...)
	defer w.unbind(names...)
	return w.all(args[b.scopeFrom:])
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
