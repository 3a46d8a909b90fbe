package declare

import (
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

// SandboxedException is verdict (ExceptionState's), unless the exception's CEL match conditions
// leave the tenant sandbox (render.SandboxedConditions): then it is Invalid, naming the field
// and the function, whatever its approval says, and dispatched nowhere. An expired exception
// stays Expired.
func SandboxedException(ex *policyhubv1.FleetPolicyException, verdict ExceptionVerdict) ExceptionVerdict {
	if verdict.State == policyhubv1.ExceptionExpired {
		return verdict
	}
	if err := render.SandboxedConditions(ex.Spec.Resources); err != nil {
		return ExceptionVerdict{State: policyhubv1.ExceptionInvalid, Message: err.Error()}
	}
	return verdict
}
