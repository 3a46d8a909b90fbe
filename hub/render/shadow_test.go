package render

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

const enforcingValidatingPolicy = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: require-team
spec:
  validationActions: [Deny, Warn]
  evaluation:
    admission:
      enabled: true
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
`

const enforcingClusterPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-team
spec:
  admission: true
  background: false
  validationFailureAction: Enforce
  validationFailureActionOverrides:
  - action: Enforce
    namespaces: [prod]
  rules:
  - name: team
    match:
      any:
      - resources:
          kinds: [Deployment]
    validate:
      failureAction: Enforce
      failureActionOverrides:
      - action: Enforce
        namespaces: [prod]
      message: a team label is required
      pattern:
        metadata:
          labels:
            team: "?*"
`

func renderedTemplate(t *testing.T, yaml string) *unstructured.Unstructured {
	t.Helper()
	fp := fleetPolicy(t, "require-team", yaml)
	obj, err := FleetPolicy("hub-a", fp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// A shadow reports and never denies, whichever kind it is a shadow of; it is owned like
// the candidate, named and labelled a shadow, and names the live policy it is compared with.
func TestShadowNeverDenies(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		reportOnly map[string]any // path → value the shadow must have
	}{
		{"ValidatingPolicy", enforcingValidatingPolicy, map[string]any{
			"spec.evaluation.admission.enabled": false, "spec.failurePolicy": "Ignore",
		}},
		{"ValidatingPolicy evaluated at admission only", strings.Replace(enforcingValidatingPolicy, "admission:\n      enabled: true", "background:\n      enabled: false", 1), map[string]any{
			"spec.evaluation.admission.enabled": true, "spec.evaluation.background.enabled": false, "spec.failurePolicy": "Ignore",
		}},
		{"ClusterPolicy evaluated at admission only", enforcingClusterPolicy, map[string]any{"spec.admission": true, "spec.background": false, "spec.failurePolicy": "Ignore"}},
		{"ClusterPolicy", strings.Replace(enforcingClusterPolicy, "background: false", "background: true", 1), map[string]any{"spec.admission": false, "spec.background": true, "spec.failurePolicy": "Ignore"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			candidate := renderedTemplate(t, tc.yaml)
			live := renderedTemplate(t, enforcingClusterPolicy)
			before := candidate.DeepCopy()
			shadow, err := Shadow(candidate, live)
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.reportOnly {
				got, _, _ := unstructured.NestedFieldNoCopy(shadow.Object, strings.Split(path, ".")...)
				if got != want {
					t.Errorf("%s = %v, want %v", path, got, want)
				}
			}
			if actions := enforcingActions(shadow.Object["spec"], "spec"); len(actions) > 0 {
				t.Errorf("the shadow still enforces at %v", actions)
			}
			if got, want := shadow.GetName(), "policyhub-shadow-require-team"; got != want {
				t.Errorf("name %q, want %q", got, want)
			}
			if !policyhubv1.IsShadow(shadow.GetLabels()) || shadow.GetLabels()[policyhubv1.LabelManagedBy] != "hub-a" ||
				shadow.GetAnnotations()[policyhubv1.AnnotationSource] != "FleetPolicy/require-team" {
				t.Errorf("labels %v annotations %v: want a shadow owned by the candidate's owner", shadow.GetLabels(), shadow.GetAnnotations())
			}
			if got := shadow.GetAnnotations()[policyhubv1.AnnotationShadowOf]; got != "ClusterPolicy/require-team" {
				t.Errorf("shadow-of %q, want ClusterPolicy/require-team", got)
			}
			if hash, _ := ContentHash(shadow); shadow.GetAnnotations()[policyhubv1.AnnotationContentHash] != hash {
				t.Error("the shadow's content hash is not its content's")
			}
			if before.GetAnnotations()[policyhubv1.AnnotationContentHash] != candidate.GetAnnotations()[policyhubv1.AnnotationContentHash] || candidate.GetName() != "require-team" {
				t.Error("rendering the shadow changed the candidate, which clusters share")
			}
			alone, err := Shadow(candidate, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, found := alone.GetAnnotations()[policyhubv1.AnnotationShadowOf]; found {
				t.Error("a shadow without a live version names one")
			}
		})
	}
}

func TestShadowRefusesWhatDoesMoreThanValidate(t *testing.T) {
	mutating := renderedTemplate(t, clusterPolicy) // its first rule mutates
	if _, err := Shadow(mutating, nil); err == nil || !strings.Contains(err.Error(), "spec.rules[0] has mutate") {
		t.Errorf("a mutating ClusterPolicy: %v, want refused naming the rule", err)
	}
	generating := renderedTemplate(t, `
apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
spec: {}
`)
	if _, err := Shadow(generating, nil); err == nil || !strings.Contains(err.Error(), "only ValidatingPolicy") {
		t.Errorf("a GeneratingPolicy: %v, want refused", err)
	}
}

// A preview with a candidate of its own ships the live version and the shadow beside it to
// every placed cluster; without one it ships the shadow alone.
func TestFleetPolicyPreviewTargets(t *testing.T) {
	placed := []placement.Target{{Cluster: "a"}, {Cluster: "b", DryRun: true}}
	fp := fleetPolicy(t, "require-team", enforcingClusterPolicy)
	candidate := fleetPolicy(t, "require-team", enforcingValidatingPolicy).Spec.Template
	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: &candidate}
	got, err := FleetPolicyTargets("hub-a", fp, placed, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b"} {
		objs := got.Objects[c]
		if len(objs) != 2 || objs[0].GetKind() != "ClusterPolicy" || policyhubv1.IsShadow(objs[0].GetLabels()) ||
			objs[1].GetKind() != "ValidatingPolicy" || !policyhubv1.IsShadow(objs[1].GetLabels()) {
			t.Fatalf("cluster %s gets %v, want the live ClusterPolicy and the candidate's shadow", c, names(objs))
		}
	}
	if !got.DryRun["b"] || got.DryRun["a"] {
		t.Errorf("dry-run %v, want b only", got.DryRun)
	}

	fp.Spec.Preview = &policyhubv1.PreviewSpec{}
	got, err = FleetPolicyTargets("hub-a", fp, placed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if objs := got.Objects["a"]; len(objs) != 1 || !policyhubv1.IsShadow(objs[0].GetLabels()) || objs[0].GetKind() != "ClusterPolicy" {
		t.Fatalf("a preview of spec.template ships %v, want its shadow alone", names(objs))
	}

	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: &fleetPolicy(t, "x", clusterPolicy).Spec.Template}
	if _, err := FleetPolicyTargets("hub-a", fp, placed, nil); err == nil {
		t.Error("a mutating candidate was previewed")
	} else if ie, ok := AsInvalid(err); !ok || ie.Reason != "TemplateNotAllowed" {
		t.Errorf("a mutating candidate: %v, want TemplateNotAllowed (spec.allow applies to the candidate too)", err)
	}
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}
