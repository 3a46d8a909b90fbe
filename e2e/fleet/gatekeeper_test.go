package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/internal/manifests"
)

// k8srequiredlabels as Gatekeeper's policy library ships it (library/general/requiredlabels):
// Rego.
const gatekeeperRequiredLabelsRego = `
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8srequiredlabels
spec:
  crd:
    spec:
      names:
        kind: K8sRequiredLabels
      validation:
        openAPIV3Schema:
          type: object
          properties:
            message:
              type: string
            labels:
              type: array
              items:
                type: object
                properties:
                  key: {type: string}
                  allowedRegex: {type: string}
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8srequiredlabels

      get_message(parameters, _default) := _default {
        not parameters.message
      }

      get_message(parameters, _) := parameters.message

      violation[{"msg": msg, "details": {"missing_labels": missing}}] {
        provided := {label | input.review.object.metadata.labels[label]}
        required := {label | label := input.parameters.labels[_].key}
        missing := required - provided
        count(missing) > 0
        def_msg := sprintf("you must provide labels: %v", [missing])
        msg := get_message(input.parameters, def_msg)
      }

      violation[{"msg": msg}] {
        value := input.review.object.metadata.labels[key]
        expected := input.parameters.labels[_]
        expected.key == key
        # do not match if allowedRegex is not defined, or is an empty string
        expected.allowedRegex != ""
        not regex.match(expected.allowedRegex, value)
        def_msg := sprintf("Label <%v: %v> does not satisfy allowed regex: %v", [key, value, expected.allowedRegex])
        msg := get_message(input.parameters, def_msg)
      }
`

// The same rule in CEL, on Gatekeeper's K8sNativeValidation engine (on by default in v3.23:
// --enable-k8s-native-validation). generateVAP false: Gatekeeper's webhook enforces it, not a
// ValidatingAdmissionPolicy (the fleet runs no --operation=generate, which would make one).
const gatekeeperRequiredLabelsCEL = `
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8srequiredlabelscel
spec:
  crd:
    spec:
      names:
        kind: K8sRequiredLabelsCel
      validation:
        openAPIV3Schema:
          type: object
          properties:
            labels:
              type: array
              items: {type: string}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        generateVAP: false
        validations:
        - expression: "variables.params.labels.all(l, has(object.metadata.labels) && l in object.metadata.labels)"
          messageExpression: "'CEL: missing required labels, requires all of: ' + variables.params.labels.join(', ')"
`

const gatekeeperConstraints = `
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata:
  name: must-have-team
spec:
  enforcementAction: deny
  match:
    kinds:
    - apiGroups: [""]
      kinds: ["Namespace"]
  parameters:
    labels:
    - key: team
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabelsCel
metadata:
  name: deployments-must-have-team
spec:
  enforcementAction: deny
  match:
    kinds:
    - apiGroups: ["apps"]
      kinds: ["Deployment"]
  parameters:
    labels: ["team"]
`

// With ManagedCluster.Gatekeeper, a managed cluster runs the real Gatekeeper: a Rego template
// (the library's k8srequiredlabels) and a CEL one (K8sNativeValidation) are accepted; their deny
// constraints refuse violating Namespaces and Deployments with Gatekeeper's own message, also to
// a client going through the gateway as the hub does; and once the Namespace constraint is
// switched to dryrun, violators are admitted and the audit counts the one that existed before any
// policy in the constraint's status. The cluster beside it runs no Gatekeeper.
func TestGatekeeperEnforcesAndAudits(t *testing.T) {
	t.Parallel()
	start := time.Now()
	f := startTestFleet(t, Options{Managed: []ManagedCluster{{Name: "cluster-1", Gatekeeper: true}, {Name: "cluster-2"}}})
	t.Logf("fleet with Gatekeeper in cluster-1 ready in %s", time.Since(start).Round(100*time.Millisecond))
	ctx := t.Context()
	c1 := f.Cluster("cluster-1")
	cl, err := client.New(c1.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c1.GatekeeperVersion != GatekeeperVersion || f.Cluster("cluster-2").GatekeeperVersion != "" {
		t.Errorf("GatekeeperVersion: cluster-1 %q, cluster-2 %q; want %q and none", c1.GatekeeperVersion, f.Cluster("cluster-2").GatekeeperVersion, GatekeeperVersion)
	}
	cl2, err := client.New(f.Cluster("cluster-2").Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := cl2.Get(ctx, types.NamespacedName{Name: "constrainttemplates.templates.gatekeeper.sh"}, crd); !apierrors.IsNotFound(err) {
		t.Errorf("cluster-2 runs no Gatekeeper, yet its ConstraintTemplate CRD: %v", err)
	}

	// A violator that exists before any policy: only the audit can find it.
	if err := cl.Create(ctx, namespace("legacy-no-team")); err != nil {
		t.Fatal(err)
	}

	for _, doc := range []string{gatekeeperRequiredLabelsRego, gatekeeperRequiredLabelsCEL} {
		objs, err := manifests.Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		template := objs[0]
		if err := cl.Create(ctx, template); err != nil {
			t.Fatalf("create ConstraintTemplate %s: %v", template.GetName(), err)
		}
		gatekeeperWait(t, c1, time.Minute, "ConstraintTemplate "+template.GetName()+" created", func(ctx context.Context) error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(template), template); err != nil {
				return err
			}
			created, _, _ := unstructured.NestedBool(template.Object, "status", "created")
			if !created {
				status, _, _ := unstructured.NestedMap(template.Object, "status")
				return fmt.Errorf("status %v", status)
			}
			return nil
		})
	}
	constraints, err := manifests.Decode([]byte(gatekeeperConstraints))
	if err != nil {
		t.Fatal(err)
	}
	for _, constraint := range constraints {
		// The template's constraint kind is a CRD Gatekeeper makes; the client's RESTMapper
		// learns it once served.
		gatekeeperWait(t, c1, time.Minute, "constraint "+constraint.GetName()+" created", func(ctx context.Context) error {
			err := cl.Create(ctx, constraint.DeepCopy())
			if meta.IsNoMatchError(err) {
				cl, _ = client.New(c1.Config, client.Options{})
			}
			return err
		})
	}

	// Rego, deny: a Namespace without the label is refused with Gatekeeper's message.
	const regoDenial = `admission webhook "validation.gatekeeper.sh" denied the request: [must-have-team] you must provide labels: {"team"}`
	gatekeeperWait(t, c1, 2*time.Minute, "must-have-team enforced", func(ctx context.Context) error {
		return wantDenied(cl.Create(ctx, namespace("probe-no-team"), client.DryRunAll), regoDenial)
	})
	throughGateway, err := gateway.ClusterConfig(f.Hub.Config, "cluster-1")
	if err != nil {
		t.Fatal(err)
	}
	viaGateway, err := client.New(throughGateway, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refused := viaGateway.Create(ctx, namespace("web-no-team"))
	if err := wantDenied(refused, regoDenial); err != nil {
		t.Errorf("a Namespace without team through the gateway: %v", err)
	} else {
		t.Logf("refused through the gateway: %v", refused)
	}
	labelled := namespace("web")
	labelled.SetLabels(map[string]string{"team": "web"})
	if err := viaGateway.Create(ctx, labelled); err != nil {
		t.Errorf("a Namespace with team through the gateway: %v", err)
	}

	// CEL, deny: a Deployment without the label is refused too.
	const celDenial = `admission webhook "validation.gatekeeper.sh" denied the request: [deployments-must-have-team] CEL: missing required labels, requires all of: team`
	deployment := func(name string, labels map[string]string) *appsv1.Deployment {
		selector := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: selector},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27.3"}}},
				},
			},
		}
	}
	gatekeeperWait(t, c1, 2*time.Minute, "deployments-must-have-team enforced", func(ctx context.Context) error {
		return wantDenied(cl.Create(ctx, deployment("probe", nil), client.DryRunAll), celDenial)
	})
	refused = cl.Create(ctx, deployment("web", nil))
	if err := wantDenied(refused, celDenial); err != nil {
		t.Errorf("a Deployment without team: %v", err)
	} else {
		t.Logf("refused: %v", refused)
	}
	if err := cl.Create(ctx, deployment("web", map[string]string{"team": "web"})); err != nil {
		t.Errorf("a Deployment with team: %v", err)
	}

	// dryrun: violators are admitted, and the audit reports the one that was there before.
	mustHaveTeam := constraints[0].DeepCopy()
	switched := time.Now()
	patch := []byte(`{"spec":{"enforcementAction":"dryrun"}}`)
	if err := cl.Patch(ctx, mustHaveTeam, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	gatekeeperWait(t, c1, time.Minute, "must-have-team in dryrun admits violators", func(ctx context.Context) error {
		return cl.Create(ctx, namespace("probe-no-team"), client.DryRunAll)
	})
	if err := cl.Create(ctx, namespace("late-no-team")); err != nil {
		t.Errorf("a Namespace without team under dryrun: %v", err)
	}
	gatekeeperWait(t, c1, 2*time.Minute, "the audit counts legacy-no-team under dryrun", func(ctx context.Context) error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(mustHaveTeam), mustHaveTeam); err != nil {
			return err
		}
		total, _, _ := unstructured.NestedInt64(mustHaveTeam.Object, "status", "totalViolations")
		violations, _, _ := unstructured.NestedSlice(mustHaveTeam.Object, "status", "violations")
		found := slices.ContainsFunc(violations, func(v any) bool {
			m, _ := v.(map[string]any)
			return m["kind"] == "Namespace" && m["name"] == "legacy-no-team" && m["enforcementAction"] == "dryrun"
		})
		if total < 1 || !found {
			audited, _, _ := unstructured.NestedString(mustHaveTeam.Object, "status", "auditTimestamp")
			return fmt.Errorf("totalViolations %d, legacy-no-team as dryrun: %v (audit at %q)", total, found, audited)
		}
		return nil
	})
	total, _, _ := unstructured.NestedInt64(mustHaveTeam.Object, "status", "totalViolations")
	audited, _, _ := unstructured.NestedString(mustHaveTeam.Object, "status", "auditTimestamp")
	t.Logf("audit %s: must-have-team totalViolations %d, %s after the switch to dryrun", audited, total, time.Since(switched).Round(100*time.Millisecond))
}

// wantDenied says why err is not a refusal carrying message.
func wantDenied(err error, message string) error {
	if err == nil {
		return fmt.Errorf("admitted; want refused with %q", message)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), message) {
		return fmt.Errorf("%w; want refused with %q", err, message)
	}
	return nil
}

// gatekeeperWait polls check until it returns nil, for up to timeout, failing at once if the
// cluster's Gatekeeper exits.
func gatekeeperWait(t *testing.T, c *Cluster, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	err := poll(ctx, 250*time.Millisecond, what, c.gatekeeper, func(ctx context.Context) (bool, error) {
		if err := check(ctx); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
