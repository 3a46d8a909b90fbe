// Package tenantcel is the sandbox for CEL a tenant writes: the match conditions of a
// FleetPolicyException and the CEL of an ApplicationPolicy. Kyverno evaluates such CEL in the
// environment of the policy it lands in, which offers libraries that reach outside the tenant's
// namespace (http.Get/Post, resource.List/Get/Post, globalContext.Get, image.GetMetadata ...).
//
// Check parses an expression with cel-go's parser (it never checks types or evaluates; the
// parser alone keeps the hub and the CLI free of CEL's runtime) and refuses it, naming the
// field and the function or variable, unless every call and every identifier is on an
// allow-list: the admission request's variables (object, oldObject, request, namespaceObject,
// variables), CEL's operators, macros and standard functions, and the pure string, list, set,
// math, regex, encoding, optional, quantity, URL, IP, CIDR, semver and format libraries that
// Kubernetes and Kyverno share. Anything else, known to be dangerous or merely unknown, is
// refused: a new Kyverno library stays out until it is added here on purpose.
//
// It is pure: a string in, a verdict out.
package tenantcel
