package v1alpha1

import (
	"strings"
	"testing"
)

// A Gatekeeper template or Constraint ships when it validates through Gatekeeper's webhook and
// audit only; the refusal says what to change.
func TestCheckAllowedGatekeeper(t *testing.T) {
	template := func(name, kind string, target map[string]any) map[string]any {
		spec := map[string]any{"crd": map[string]any{"spec": map[string]any{"names": map[string]any{"kind": kind}}}}
		if target != nil {
			spec["targets"] = []any{target}
		}
		return map[string]any{"apiVersion": GatekeeperTemplateAPIVersion, "kind": "ConstraintTemplate",
			"metadata": map[string]any{"name": name}, "spec": spec}
	}
	rego := func(code string) map[string]any {
		return map[string]any{"target": GatekeeperTarget, "rego": code}
	}
	constraint := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": GatekeeperConstraintAPIVersion, "kind": "K8sRequiredLabels",
			"metadata": map[string]any{"name": "must-have-team"}, "spec": spec}
	}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want string // "" ships
	}{
		{"a Rego template", template("k8srequiredlabels", "K8sRequiredLabels", rego("package k8srequiredlabels\nviolation[{\"msg\": \"x\"}] { true }")), ""},
		{"a CEL template", template("k8srequiredlabelscel", "K8sRequiredLabelsCel", map[string]any{"target": GatekeeperTarget,
			"code": []any{map[string]any{"engine": "K8sNativeValidation", "source": map[string]any{"generateVAP": false, "validations": []any{}}}}}), ""},
		{"a template that makes a ValidatingAdmissionPolicy", template("a", "A", map[string]any{"target": GatekeeperTarget,
			"code": []any{map[string]any{"engine": "K8sNativeValidation", "source": map[string]any{"generateVAP": true}}}}), "generateVAP"},
		{"a template named other than its kind", template("required-labels", "K8sRequiredLabels", rego("package x")), "lower case"},
		{"a template without a kind", template("a", "", rego("package x")), "names.kind is required"},
		{"a template without targets", template("a", "A", nil), "exactly one target"},
		{"a template of another target", template("a", "A", map[string]any{"target": "audit.example.com", "rego": "package x"}), "validating admission only"},
		{"Rego calling http.send", template("a", "A", rego("package a\nviolation[{\"msg\": m}] { r := http.send({\"url\": \"https://x\"}); m := r.body }")), "http.send"},
		{"Rego calling external_data", template("a", "A", rego("package a\nviolation[{\"msg\": m}] { r := external_data({\"provider\": \"p\", \"keys\": []}); m := \"x\" }")), "external_data"},
		{"Rego reading its process", template("a", "A", rego("package a\nviolation[{\"msg\": m}] { m := opa.runtime().env.TOKEN }")), "opa.runtime"},
		{"Rego resolving names in libs", template("a", "A", map[string]any{"target": GatekeeperTarget, "rego": "package a", "libs": []any{"package lib.x\nf(h) := net.lookup_ip_addr(h)"}}), "net.lookup_ip_addr"},
		{"a template of a Kyverno kind's name", template("clusterpolicy", "ClusterPolicy", rego("package x")), "mix its results"},
		{"a Constraint of a Kyverno kind's name", map[string]any{"apiVersion": GatekeeperConstraintAPIVersion, "kind": "ValidatingPolicy",
			"metadata": map[string]any{"name": "a"}, "spec": map[string]any{}}, "mix its results"},
		{"a Constraint as written", constraint(map[string]any{"match": map[string]any{}}), ""},
		{"a warn Constraint", constraint(map[string]any{"enforcementAction": "warn"}), ""},
		{"a dryrun Constraint", constraint(map[string]any{"enforcementAction": "dryrun"}), ""},
		{"a scoped Constraint", constraint(map[string]any{"enforcementAction": "scoped", "scopedEnforcementActions": []any{}}), "scoped"},
		{"an unknown action", constraint(map[string]any{"enforcementAction": "Deny"}), "deny, warn or dryrun"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAllowed(tc.obj, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
}
