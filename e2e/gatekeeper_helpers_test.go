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

// gatekeeperTemplate is a FleetPolicy (name) carrying a ConstraintTemplate of kind whose
// Constraints list the labels they require, judged by target (its targets' one entry, after
// "target: admission.k8s.gatekeeper.sh", indented as a field of it).
func gatekeeperTemplate(name, kind, target string) string {
	return fmt.Sprintf(`
metadata: {name: %[1]s}
spec:
  placement: {clusters: [%[2]s]}
  template:
    apiVersion: templates.gatekeeper.sh/v1
    kind: ConstraintTemplate
    metadata: {name: %[3]s}
    spec:
      crd:
        spec:
          names: {kind: %[4]s}
          validation:
            openAPIV3Schema:
              type: object
              properties:
                labels: {type: array, items: {type: string}}
      targets:
      - target: admission.k8s.gatekeeper.sh
%[5]s`, name, gatekeeperCluster, strings.ToLower(kind), kind, target)
}

// gatekeeperRegoTemplate is a FleetPolicy (name) carrying a Rego ConstraintTemplate of kind that
// requires the labels its Constraints list (Gatekeeper's library k8srequiredlabels, shortened).
func gatekeeperRegoTemplate(name, kind string) string {
	return gatekeeperTemplate(name, kind, fmt.Sprintf(`        rego: |
          package %s

          violation[{"msg": msg}] {
            provided := {label | input.review.object.metadata.labels[label]}
            required := {label | label := input.parameters.labels[_]}
            missing := required - provided
            count(missing) > 0
            msg := sprintf("you must provide labels: %%v", [missing])
          }
`, strings.ToLower(kind)))
}

// gatekeeperCELTemplate is gatekeeperRegoTemplate's rule in CEL, on Gatekeeper's
// K8sNativeValidation engine, enforced by Gatekeeper's webhook (no generated VAP).
func gatekeeperCELTemplate(name, kind string) string {
	return gatekeeperTemplate(name, kind, `        code:
        - engine: K8sNativeValidation
          source:
            generateVAP: false
            validations:
            - expression: "variables.params.labels.all(l, has(object.metadata.labels) && l in object.metadata.labels)"
              messageExpression: "'CEL: missing required labels, requires all of: ' + variables.params.labels.join(', ')"
`)
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
