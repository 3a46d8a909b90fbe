package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Gatekeeper declarations as the tests write them: a FleetPolicy per object, the template's and
// each Constraint's, placed on gatekeeperCluster. Each test names kinds of its own, so that
// parallel tests never render the same template.

// constraintTemplateYAML is a ConstraintTemplate of kind whose Constraints list the labels they
// require, judged by target (its targets' one entry, after "target: admission.k8s.gatekeeper.sh",
// indented as a field of it: four spaces), at column 0.
func constraintTemplateYAML(kind, target string) string {
	return fmt.Sprintf(`apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: %[1]s}
spec:
  crd:
    spec:
      names: {kind: %[2]s}
      validation:
        openAPIV3Schema:
          type: object
          properties:
            labels: {type: array, items: {type: string}}
  targets:
  - target: admission.k8s.gatekeeper.sh
%[3]s`, strings.ToLower(kind), kind, target)
}

// regoTarget is a Rego target of kind's template that requires the labels its Constraints list
// (Gatekeeper's library k8srequiredlabels, shortened), its message msgPrefix then the missing
// labels.
func regoTarget(kind, msgPrefix string) string {
	return fmt.Sprintf(`    rego: |
      package %s

      violation[{"msg": msg}] {
        provided := {label | input.review.object.metadata.labels[label]}
        required := {label | label := input.parameters.labels[_]}
        missing := required - provided
        count(missing) > 0
        msg := sprintf("%s%%v", [missing])
      }
`, strings.ToLower(kind), msgPrefix)
}

// gatekeeperTemplate is a FleetPolicy (name) carrying constraintTemplateYAML(kind, target).
func gatekeeperTemplate(name, kind, target string) string {
	return fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusters: [%s]}
  template:
%s`, name, gatekeeperCluster, indented(constraintTemplateYAML(kind, target), 4))
}

// gatekeeperRegoTemplate is a FleetPolicy (name) carrying a Rego ConstraintTemplate of kind that
// requires the labels its Constraints list.
func gatekeeperRegoTemplate(name, kind string) string {
	return gatekeeperTemplate(name, kind, regoTarget(kind, "you must provide labels: "))
}

// gatekeeperCELTemplate is gatekeeperRegoTemplate's rule in CEL, on Gatekeeper's
// K8sNativeValidation engine, enforced by Gatekeeper's webhook (no generated VAP).
func gatekeeperCELTemplate(name, kind string) string {
	return gatekeeperTemplate(name, kind, `    code:
    - engine: K8sNativeValidation
      source:
        generateVAP: false
        validations:
        - expression: "variables.params.labels.all(l, has(object.metadata.labels) && l in object.metadata.labels)"
          messageExpression: "'CEL: missing required labels, requires all of: ' + variables.params.labels.join(', ')"
`)
}

// indented is text with every non-empty line indented by n spaces.
func indented(text string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

// listItem is text as an item of a YAML list whose dashes are n spaces in.
func listItem(text string, n int) string {
	item := indented(text, n+2)
	return strings.Repeat(" ", n) + "- " + item[n+2:]
}

// gatekeeperConstraint is a FleetPolicy (name, in mode) carrying a Constraint of kind, named
// name, that requires a team label on the Deployments of namespace ns.
func gatekeeperConstraint(name, mode, kind, ns string) string {
	return fmt.Sprintf(`
metadata: {name: %[1]s}
spec:
  mode: %[2]s
  placement: {clusters: [%[3]s]}
  template:
    apiVersion: constraints.gatekeeper.sh/v1beta1
    kind: %[4]s
    spec:
      match:
        namespaces: [%[5]s]
        kinds:
        - apiGroups: [apps]
          kinds: [Deployment]
      parameters:
        labels: [team]
`, name, mode, gatekeeperCluster, kind, ns)
}

// gatekeeperObject reads a Gatekeeper object of gatekeeperCluster (a template: group
// templates.gatekeeper.sh, kind ConstraintTemplate; a Constraint: its kind).
func gatekeeperObject(ctx context.Context, c client.Client, group, version, kind, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return u, c.Get(ctx, client.ObjectKey{Name: name}, u)
}

func constraintTemplate(ctx context.Context, c client.Client, name string) (*unstructured.Unstructured, error) {
	return gatekeeperObject(ctx, c, "templates.gatekeeper.sh", "v1", "ConstraintTemplate", name)
}

func constraint(ctx context.Context, c client.Client, kind, name string) (*unstructured.Unstructured, error) {
	return gatekeeperObject(ctx, c, "constraints.gatekeeper.sh", "v1beta1", kind, name)
}

// logGatekeeperOnFailure logs, when the test has failed, the status Gatekeeper wrote into the
// templates of kinds and into the Constraints of those kinds: what the hub judged in force from.
func logGatekeeperOnFailure(t *testing.T, kinds ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		c := directClient(t, fleetOf(t).Cluster(gatekeeperCluster).Config)
		for _, kind := range kinds {
			if u, err := constraintTemplate(ctx, c, strings.ToLower(kind)); err == nil {
				t.Logf("template %s: generation %d, status %v", u.GetName(), u.GetGeneration(), u.Object["status"])
			} else {
				t.Logf("template of %s: %v", kind, err)
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: "constraints.gatekeeper.sh", Version: "v1beta1", Kind: kind + "List"})
			if err := c.List(ctx, list); err != nil {
				t.Logf("Constraints of %s: %v", kind, err)
				continue
			}
			for _, u := range list.Items {
				t.Logf("Constraint %s %s: generation %d, status %v", kind, u.GetName(), u.GetGeneration(), u.Object["status"])
			}
		}
	})
}
