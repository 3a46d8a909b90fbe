package work

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestGatekeeperReadiness(t *testing.T) {
	pod := func(enforced bool, generation int64, errs ...any) any {
		p := map[string]any{"id": "gatekeeper-a", "observedGeneration": generation, "enforced": enforced}
		if len(errs) > 0 {
			p["errors"] = errs
		}
		return p
	}
	obj := func(apiVersion, kind string, generation int64, status map[string]any) *unstructured.Unstructured {
		u := policyWithStatus(apiVersion, kind, status)
		u.SetGeneration(generation)
		return u
	}
	template := func(generation int64, status map[string]any) *unstructured.Unstructured {
		return obj(policyhubv1.GatekeeperTemplateAPIVersion, "ConstraintTemplate", generation, status)
	}
	constraint := func(generation int64, status map[string]any) *unstructured.Unstructured {
		return obj(policyhubv1.GatekeeperConstraintAPIVersion, "K8sRequiredLabels", generation, status)
	}
	for _, tc := range []struct {
		name         string
		obj          *unstructured.Unstructured
		ready, known bool
	}{
		{"template not seen yet", template(1, nil), false, false},
		{"template created", template(1, map[string]any{"created": true, "byPod": []any{pod(false, 1)}}), true, true},
		{"template not created", template(1, map[string]any{"created": false}), false, true},
		{"template with a pod's error", template(1, map[string]any{"created": true, "byPod": []any{pod(false, 1, map[string]any{"message": "rego_parse_error"})}}), false, true},
		{"template created at an older generation", template(2, map[string]any{"created": true, "byPod": []any{pod(false, 1)}}), false, true},
		{"constraint not seen yet", constraint(1, map[string]any{"totalViolations": int64(0)}), false, false},
		{"constraint enforced by every pod", constraint(1, map[string]any{"byPod": []any{pod(true, 1), pod(true, 1)}}), true, true},
		{"constraint enforced by one pod of two", constraint(1, map[string]any{"byPod": []any{pod(true, 1), pod(false, 1)}}), false, true},
		{"constraint enforced at an older generation", constraint(3, map[string]any{"byPod": []any{pod(true, 2)}}), false, true},
		{"constraint enforced, with an error of its generated binding", constraint(1, map[string]any{"byPod": []any{pod(true, 1, map[string]any{"message": "cannot generate ValidatingAdmissionPolicyBinding: conditions are not satisfied"})}}), true, true},
		{"constraint not enforced, with an error", constraint(1, map[string]any{"byPod": []any{pod(false, 1, map[string]any{"message": "x"})}}), false, true},
		{"constraint with a malformed pod entry", constraint(1, map[string]any{"byPod": []any{"x"}}), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ready, known := engineReady(tc.obj); ready != tc.ready || known != tc.known {
				t.Fatalf("engineReady = %v, %v; want %v, %v", ready, known, tc.ready, tc.known)
			}
		})
	}
}

// Templates are written before the Constraints they make and pruned after them.
func TestGatekeeperWriteStages(t *testing.T) {
	u := func(apiVersion, kind string) *unstructured.Unstructured {
		return policyWithStatus(apiVersion, kind, nil)
	}
	template, constraint := u(policyhubv1.GatekeeperTemplateAPIVersion, "ConstraintTemplate"), u(policyhubv1.GatekeeperConstraintAPIVersion, "K8sRequiredLabels")
	policy := u("kyverno.io/v1", "ClusterPolicy")
	for _, tc := range []struct {
		c     *change
		stage int
	}{
		{&change{action: ActionCreate, desired: template}, 0},
		{&change{action: ActionCreate, desired: policy}, 0},
		{&change{action: ActionDelete, live: constraint}, 0},
		{&change{action: ActionCreate, desired: constraint}, 1},
		{&change{action: ActionUpdate, desired: constraint, live: constraint}, 1},
		{&change{action: ActionDelete, live: template}, 2},
	} {
		if got := writeStage(tc.c); got != tc.stage || got >= writeStages {
			t.Errorf("%s %s: stage %d, want %d", tc.c.action, kindOf(tc.c), got, tc.stage)
		}
	}
}

func kindOf(c *change) string {
	if c.desired != nil {
		return c.desired.GetKind()
	}
	return c.live.GetKind()
}

// Without Gatekeeper a Constraint or template is Unsupported, naming the engine; with it, a
// Constraint kind not made yet is Pending, asked about again first.
func TestGatekeeperMissing(t *testing.T) {
	constraint := schema.GroupVersionKind{Group: policyhubv1.GatekeeperConstraintGroup, Version: "v1beta1", Kind: "K8sRequiredLabels"}
	policy := schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"}
	for _, tc := range []struct {
		name                string
		served              map[schema.GroupVersionKind]bool
		servedAfterRefresh  bool
		missing             []schema.GroupVersionKind
		want                string
		pending, refreshing bool
	}{
		{"no Gatekeeper", nil, false, []schema.GroupVersionKind{constraint}, "does not run the Gatekeeper engine", false, false},
		{"no Gatekeeper, a template", nil, false, []schema.GroupVersionKind{gatekeeperTemplateGVK}, "install Gatekeeper", false, false},
		{"the kind not made yet", map[schema.GroupVersionKind]bool{gatekeeperTemplateGVK: true}, false, []schema.GroupVersionKind{constraint}, "does not serve the Constraint kind K8sRequiredLabels yet", true, true},
		{"the kind made since discovery was asked", map[schema.GroupVersionKind]bool{gatekeeperTemplateGVK: true}, true, []schema.GroupVersionKind{constraint}, "", false, true},
		{"not Gatekeeper's", nil, false, []schema.GroupVersionKind{policy}, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refreshed := false
			serves := func(gvk schema.GroupVersionKind) (bool, error) {
				return tc.served[gvk] || (refreshed && tc.servedAfterRefresh && gvk == constraint), nil
			}
			message, pending, err := gatekeeperMissing("c1", tc.missing, serves, func(string) error { refreshed = true; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if pending != tc.pending || refreshed != tc.refreshing || (tc.want == "") != (message == "") || !strings.Contains(message, tc.want) {
				t.Errorf("message %q, pending %v, refreshed %v; want %q, %v, %v", message, pending, refreshed, tc.want, tc.pending, tc.refreshing)
			}
		})
	}
}

// A set holding a template and its Constraint ships the template while the Constraint's kind is
// not served; a Constraint alone has nothing else to ship.
func TestWithoutUnservedConstraints(t *testing.T) {
	served := schema.GroupVersionKind{Group: policyhubv1.GatekeeperConstraintGroup, Version: "v1beta1", Kind: "Served"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(served, meta.RESTScopeRoot)
	u := func(apiVersion, kind string) *unstructured.Unstructured {
		return policyWithStatus(apiVersion, kind, nil)
	}
	template := u(policyhubv1.GatekeeperTemplateAPIVersion, "ConstraintTemplate")
	waiting := u(policyhubv1.GatekeeperConstraintAPIVersion, "Waiting")
	ready := u(policyhubv1.GatekeeperConstraintAPIVersion, "Served")
	for _, tc := range []struct {
		name  string
		objs  []*unstructured.Unstructured
		kept  int
		mixed bool
	}{
		{"a template and a Constraint not served yet", []*unstructured.Unstructured{template, waiting, ready}, 2, true},
		{"a Constraint alone", []*unstructured.Unstructured{waiting}, 1, false},
		{"everything served", []*unstructured.Unstructured{template, ready}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rest, mixed := withoutUnservedConstraints(Declaration{Source: "s", Objects: tc.objs, Prune: true}, mapper)
			if mixed != tc.mixed || len(rest.Objects) != tc.kept || !rest.Prune {
				t.Errorf("kept %d (mixed %v), want %d (%v)", len(rest.Objects), mixed, tc.kept, tc.mixed)
			}
			if slices.Contains(rest.Objects, waiting) && tc.mixed {
				t.Error("the Constraint whose kind is not served was kept")
			}
		})
	}
}
