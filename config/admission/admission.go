package admission

import (
	_ "embed"
	"slices"
)

//go:embed exceptions.yaml
var exceptions []byte

// Exceptions is config/admission/exceptions.yaml: the validating admission policies (and their
// bindings) that fence the approval of FleetPolicyExceptions.
func Exceptions() []byte { return slices.Clone(exceptions) }
