package render

import (
	"fmt"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render/tenantcel"
)

// SandboxedConditions refuses an exception's CEL match conditions unless each stays in the
// tenant sandbox (tenantcel): Kyverno evaluates them in the environment of the policy exempted
// from, whose libraries reach other namespaces and the network. Every exception is held to it,
// the hub admin's too: an exception is a request, and its conditions are copied verbatim.
func SandboxedConditions(res policyhubv1.ExceptionResources) error {
	for i, c := range res.MatchConditions {
		if err := tenantcel.Check(fmt.Sprintf("spec.resources.matchConditions[%d].expression", i), c.Expression); err != nil {
			return err
		}
	}
	return nil
}
