package evaluate

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// compile compiles a policy's variables, match conditions, validations, message expressions
// and audit annotations as the API server's ValidatingAdmissionPolicy plugin does: this is
// its compilePolicy (k8s.io/apiserver v0.35.4, plugin.go), which the package does not export,
// line for line, with the same base CEL environment (DefaultCompatibilityVersion, strict
// cost). Policies with paramKind are never compiled here (see Set): they have no params.
func compile(policy *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	optionalVars := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	expressionOptionalVars := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: false}
	failurePolicy := policy.Spec.FailurePolicy
	filterCompiler := cel.NewCompositedCompilerFromTemplate(compositionEnv())
	filterCompiler.CompileAndStoreVariables(variables(policy.Spec.Variables), optionalVars, environment.StoredExpressions)

	var matcher matchconditions.Matcher
	if conds := policy.Spec.MatchConditions; len(conds) > 0 {
		accessors := make([]cel.ExpressionAccessor, len(conds))
		for i := range conds {
			accessors[i] = (*matchconditions.MatchCondition)(&conds[i])
		}
		matcher = matchconditions.NewMatcher(filterCompiler.CompileCondition(accessors, optionalVars, environment.StoredExpressions), failurePolicy, "policy", "validate", policy.Name)
	}
	return validating.NewValidator(
		filterCompiler.CompileCondition(validations(policy.Spec.Validations), optionalVars, environment.StoredExpressions),
		matcher,
		filterCompiler.CompileCondition(auditAnnotations(policy.Spec.AuditAnnotations), optionalVars, environment.StoredExpressions),
		filterCompiler.CompileCondition(messageExpressions(policy.Spec.Validations), expressionOptionalVars, environment.StoredExpressions),
		failurePolicy,
	)
}

var (
	compositionOnce sync.Once
	composition     *cel.CompositionEnv
)

// compositionEnv is the API server's template environment, made once (it is expensive).
func compositionEnv() *cel.CompositionEnv {
	compositionOnce.Do(func() {
		env, err := cel.NewCompositionEnv(cel.VariablesTypeName, environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
		if err != nil {
			panic("evaluate: the API server's CEL environment: " + err.Error()) // as the API server does
		}
		composition = env
	})
	return composition
}

func validations(in []admissionregistrationv1.Validation) []cel.ExpressionAccessor {
	out := make([]cel.ExpressionAccessor, len(in))
	for i, v := range in {
		out[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
	}
	return out
}

func messageExpressions(in []admissionregistrationv1.Validation) []cel.ExpressionAccessor {
	out := make([]cel.ExpressionAccessor, len(in))
	for i, v := range in {
		if v.MessageExpression != "" {
			out[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return out
}

func auditAnnotations(in []admissionregistrationv1.AuditAnnotation) []cel.ExpressionAccessor {
	out := make([]cel.ExpressionAccessor, len(in))
	for i, a := range in {
		out[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return out
}

func variables(in []admissionregistrationv1.Variable) []cel.NamedExpressionAccessor {
	out := make([]cel.NamedExpressionAccessor, len(in))
	for i, v := range in {
		out[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	return out
}
