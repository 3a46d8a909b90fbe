// Package tocel converts a legacy Kyverno validate policy (kyverno.io/v1 ClusterPolicy or Policy)
// into its CEL form, a policies.kyverno.io/v1 ValidatingPolicy (NamespacedValidatingPolicy for a
// namespaced Policy), and reports, rule by rule, what it converted and why it refused what it did
// not.
//
// It is pure: values in, values out, no clients, no global mutable state. The same input always
// converts to the same output.
//
// It never silently changes a policy's meaning. (A ValidatingPolicy has no "skip": where the
// legacy rule skipped a resource, the converted policy passes it; where a legacy rule's
// preconditions skipped, the policy does not match.) What it cannot express exactly it refuses, and a
// policy with any refused rule is refused as a whole (Result.Policy is nil, Result.Report says
// why). Converted today:
//
//   - match/exclude of kinds (a fixed kind table), operations, namespaces (as a namespaceSelector
//     on kubernetes.io/metadata.name), names with wildcards (as matchConditions, autogen off as
//     in Kyverno), selector/namespaceSelector (match only);
//   - validate.pattern and validate.anyPattern with plain keys, the equality anchor =(), the
//     negation anchor X(), the condition anchor () (Kyverno's skip read as "does not fail", see
//     condition.go), lists (each element checked against the single element pattern),
//     scalars checked against each element of a list, and string patterns with wildcards
//     (star and question mark), the operator !, the alternatives | and &, and the comparisons
//     >, >=, <, <= with an integer bound (ints exactly, strings as Kyverno reads them: a duration
//     against 0, else a quantity; see numeric.go);
//   - validate.foreach over a list at request.object.<path> with a nested pattern, anyPattern or
//     deny;
//   - validate.deny conditions that test a literal name against element.keys(@) in a foreach,
//     deny: {} (always deny), and preconditions on request.operation (as resourceRules
//     operations); see deny.go;
//   - validationFailureAction / failureAction (Enforce → Deny, Audit → Audit; always written),
//     with Kyverno's allowExistingViolations for Enforce (an UPDATE passes when the old object
//     fails too), background → evaluation.background.enabled, autogen
//     (pod-policies.kyverno.io/autogen-controllers).
//
// Refused, each with a reason in the Report: context entries (apiCall, configMap, variables),
// {{ }} variables in patterns and messages, JMESPath beyond the forms above, the global ^(),
// existence <() and add +() anchors, wildcard keys, ranges, comparisons with a
// quantity or duration bound, literals that Kyverno would compare as a quantity or duration,
// wildcards whose answer on a floating-point number depends on its text, mutate/generate/verifyImages/podSecurity/manifests/cel rules, match by annotations,
// subjects or roles, namespaces with wildcards or cluster-scoped kinds, exclude by
// selector or operation, rules whose match, preconditions or action differ within one policy,
// and emitWarning with Enforce.
package tocel
