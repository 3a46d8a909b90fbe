package tocel

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/library"
)

// evaluator compiles and runs converted expressions the way a ValidatingPolicy binds them:
// object, oldObject, request and namespaceObject, all dyn.
type evaluator struct{ env *cel.Env }

func newEvaluator(t *testing.T) *evaluator {
	t.Helper()
	env, err := cel.NewEnv(
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		library.Quantity(), // Kyverno's environment has the Kubernetes CEL libraries
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType),
	)
	if err != nil {
		t.Fatalf("CEL environment: %v", err)
	}
	return &evaluator{env: env}
}

// compile checks that expr compiles to a bool.
func (e *evaluator) compile(expr string) (cel.Program, error) {
	ast, iss := e.env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compile %q: %w", expr, iss.Err())
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("compile %q: output type %v, want bool", expr, ast.OutputType())
	}
	return e.env.Program(ast)
}

// eval runs expr against object as a CREATE request.
func (e *evaluator) eval(expr string, object map[string]any) (bool, error) {
	return e.evalRequest(expr, "CREATE", object, nil)
}

// evalRequest runs expr for an admission request of the given operation.
func (e *evaluator) evalRequest(expr, operation string, object, oldObject map[string]any) (bool, error) {
	prg, err := e.compile(expr)
	if err != nil {
		return false, err
	}
	var obj, old any // a nil map would reach CEL as {}, not null
	if object != nil {
		obj = object
	}
	if oldObject != nil {
		old = oldObject
	}
	out, _, err := prg.Eval(map[string]any{
		"object":          obj,
		"oldObject":       old,
		"request":         map[string]any{"operation": operation, "object": obj, "oldObject": old},
		"namespaceObject": nil,
	})
	if err != nil {
		return false, fmt.Errorf("evaluate %q: %w", expr, err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluate %q: got %v (%T), want bool", expr, out, out)
	}
	return bool(b), nil
}
