package render

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

func fleetPolicy(t *testing.T, name, templateYAML string) *policyhubv1.FleetPolicy {
	t.Helper()
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	var tmpl map[string]any
	if err := yaml.Unmarshal([]byte(templateYAML), &tmpl); err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &fp.Spec.Template); err != nil {
		t.Fatal(err)
	}
	return fp
}

const clusterPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  labels:
    team: platform
    policyhub.io/managed-by: someone-else
  annotations:
    policies.kyverno.io/severity: medium
spec:
  background: true
  rules:
  - name: add-owner
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            +(owner): platform
  - name: require-pinned-image
    match:
      any:
      - resources:
          kinds: [Deployment]
    validate:
      failureAction: Enforce
      message: pin the image
      pattern:
        spec:
          template:
            spec:
              containers:
              - image: "!*:latest"
`

const legacyClusterPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  validationFailureAction: Enforce
  rules:
  - name: require-team
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      message: need a team label
      pattern:
        metadata:
          labels:
            team: "?*"
`

const validatingPolicy = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: require-team-label
spec:
  validationActions: [Audit, Warn]
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: "'team' in object.metadata.labels"
`

const namespacedPolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: shop-limits
  namespace: shop
spec:
  rules:
  - name: limits
    match:
      any:
      - resources:
          kinds: [Deployment]
    validate:
      failureAction: Audit
      pattern:
        spec:
          template:
            spec:
              containers:
              - resources:
                  limits:
                    memory: "?*"
`

const mutatingPolicy = `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
`

const mutateOnlyClusterPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  rules:
  - name: add-owner
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            owner: platform
`

func mode(m policyhubv1.Mode) *policyhubv1.Mode { return &m }

func TestFleetPolicy(t *testing.T) {
	tests := []struct {
		name     string // also the golden file's name
		fpName   string
		template string
		mode     *policyhubv1.Mode
		hubID    string
		wantErr  string
	}{
		{name: "clusterpolicy-template-mode", fpName: "disallow-latest", template: clusterPolicy, hubID: "hub-a"},
		{name: "clusterpolicy-mode-audit", fpName: "disallow-latest", template: clusterPolicy, mode: mode(policyhubv1.ModeAudit), hubID: "hub-a"},
		{name: "clusterpolicy-legacy-policy-wide-action", fpName: "require-team", template: legacyClusterPolicy, mode: mode(policyhubv1.ModeAudit), hubID: "hub-a"},
		{name: "validatingpolicy-enforce-keeps-warn", fpName: "team-label", template: validatingPolicy, mode: mode(policyhubv1.ModeEnforce), hubID: "hub-a"},
		{name: "namespaced-policy", fpName: "shop", template: namespacedPolicy, mode: mode(policyhubv1.ModeEnforce), hubID: "hub-a"},
		{name: "long-name-has-no-name-label", fpName: strings.Repeat("a", 70), template: legacyClusterPolicy, hubID: "hub-a"},
		{name: "mode-on-a-mutating-policy", fpName: "m", template: mutatingPolicy, mode: mode(policyhubv1.ModeEnforce), hubID: "hub-a",
			wantErr: "mode Enforce does not apply to MutatingPolicy.policies.kyverno.io m: only validating kinds have a failure action"},
		{name: "mode-on-mutate-only-rules", fpName: "m", template: mutateOnlyClusterPolicy, mode: mode(policyhubv1.ModeAudit), hubID: "hub-a",
			wantErr: "ClusterPolicy m has no validate or verifyImages rule to apply it to"},
		{name: "bad-hub-id", fpName: "m", template: clusterPolicy, hubID: "hub/a", wantErr: `hub id "hub/a" is not a valid label value`},
		{name: "empty-hub-id", fpName: "m", template: clusterPolicy, hubID: "", wantErr: `hub id ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FleetPolicy(tt.hubID, fleetPolicy(t, tt.fpName, tt.template), tt.mode)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := yaml.Marshal(got.Object)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./hub/render -update to write it)", err)
			}
			if string(out) != string(want) {
				t.Errorf("render differs from %s:\n--- got\n%s\n--- want\n%s", golden, out, want)
			}
		})
	}
}

// Rendering is deterministic and the hash follows the content: the same input renders the same
// hash every time, a changed spec changes it, and the hash covers the ownership labels too.
func TestContentHash(t *testing.T) {
	fp := fleetPolicy(t, "p", clusterPolicy)
	hashOf := func(hubID string, fp *policyhubv1.FleetPolicy, m *policyhubv1.Mode) string {
		obj, err := FleetPolicy(hubID, fp, m)
		if err != nil {
			t.Fatal(err)
		}
		return obj.GetAnnotations()[policyhubv1.AnnotationContentHash]
	}
	first := hashOf("hub-a", fp, nil)
	if !strings.HasPrefix(first, "sha256:") || len(first) != len("sha256:")+64 {
		t.Fatalf("hash %q is not sha256:<64 hex>", first)
	}
	for range 20 {
		if again := hashOf("hub-a", fp, nil); again != first {
			t.Fatalf("hash changed between identical renders: %s then %s", first, again)
		}
	}
	if hashOf("hub-a", fp, mode(policyhubv1.ModeAudit)) == first {
		t.Errorf("a mode change did not change the hash")
	}
	if hashOf("hub-b", fp, nil) == first {
		t.Errorf("another hub's render has the same hash")
	}
	changed := fp.DeepCopy()
	changed.Spec.Template.Spec = &runtime.RawExtension{Raw: []byte(`{"background":false,"rules":[]}`)}
	if hashOf("hub-a", changed, nil) == first {
		t.Errorf("a spec change did not change the hash")
	}
	// The input is never modified.
	if fp.Spec.Template.Metadata.Labels[policyhubv1.LabelManagedBy] != "someone-else" {
		t.Errorf("render modified the FleetPolicy's template labels")
	}
}

// Integers in a template stay integers (int64), as in objects read from the API, so comparing a
// render with the live object does not see 3 and 3.0 as different.
func TestTemplateKeepsIntegers(t *testing.T) {
	fp := fleetPolicy(t, "p", `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  rules:
  - name: r
    validate:
      pattern: {spec: {replicas: 3}}
`)
	obj, err := FleetPolicy("hub-a", fp, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	replicas, _, _ := unstructured.NestedFieldNoCopy(rules[0].(map[string]any), "validate", "pattern", "spec", "replicas")
	if _, ok := replicas.(int64); !ok {
		t.Errorf("replicas decoded as %T, want int64", replicas)
	}
}

// A ClusterPolicy with every enforcement knob kyverno.io has: a rule's failureAction and its
// per-namespace overrides (an enforcing one in lower case, which Kyverno accepts, and an Audit
// exemption), a verifyImages rule's failureAction, and the deprecated policy-wide action and
// overrides.
const overridesClusterPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  validationFailureAction: Enforce
  validationFailureActionOverrides:
  - action: Enforce
    namespaces: [prod-*]
  - action: audit
    namespaces: [sandbox]
  rules:
  - name: require-team
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: Enforce
      failureActionOverrides:
      - action: enforce
        namespaces: [prod]
      - action: Audit
        namespaces: [dev]
        namespaceSelector:
          matchLabels: {tier: dev}
      pattern:
        metadata:
          labels:
            team: "?*"
  - name: signed-images
    match:
      any:
      - resources:
          kinds: [Pod]
    verifyImages:
    - imageReferences: ["registry.example.com/*"]
      failureAction: Enforce
    - imageReferences: ["ghcr.io/*"]
`

// Only enforcing overrides: Audit must drop both fields whole.
const enforceOverridesPolicy = `
apiVersion: kyverno.io/v2beta1
kind: Policy
metadata:
  namespace: shop
spec:
  validationFailureActionOverrides:
  - action: Enforce
    namespaces: [shop]
  rules:
  - name: limits
    match:
      any:
      - resources:
          kinds: [Deployment]
    validate:
      failureAction: Audit
      failureActionOverrides:
      - action: Enforce
        namespaceSelector:
          matchLabels: {env: prod}
      deny: {}
`

const verifyImagesOnlyPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  rules:
  - name: signed-images
    verifyImages:
    - imageReferences: ["*"]
      failureAction: Enforce
`

const imageValidatingPolicy = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata:
  namespace: shop
spec:
  validationActions: [Deny]
  matchImageReferences:
  - glob: "*"
`

// enforcingActions walks the whole object and lists, by path, every action field whose value
// enforces: failureAction, validationFailureAction or an override's action set to Enforce (in
// any case), and Deny in validationActions.
func enforcingActions(v any, path string) []string {
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			p := path + "." + k
			switch s, _ := sub.(string); {
			case (k == "failureAction" || k == "validationFailureAction" || k == "action") && (strings.EqualFold(s, "enforce") || strings.EqualFold(s, "deny")):
				found = append(found, p+"="+s)
			case k == "validationActions":
				for _, a := range sub.([]any) {
					if strings.EqualFold(a.(string), "deny") {
						found = append(found, p+"=Deny")
					}
				}
			}
			found = append(found, enforcingActions(sub, p)...)
		}
	case []any:
		for i, sub := range v {
			found = append(found, enforcingActions(sub, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return found
}

// Audit leaves nothing that enforces anywhere in the object: not a rule's action, not a
// verifyImages entry's, not a per-namespace override (rule-level or policy-wide), not Deny. The
// Audit overrides the template's author wrote stay; a list with nothing left goes.
func TestSetModeAuditLeavesNoEnforcement(t *testing.T) {
	tests := []struct {
		name     string
		template string
		// kept are the paths (in enforcingActions' notation) that must still be there after Audit;
		// gone the ones that must not.
		kept, gone []string
	}{
		{name: "every kyverno.io knob", template: overridesClusterPolicy,
			kept: []string{".spec.rules[0].validate.failureActionOverrides[0].namespaceSelector", ".spec.validationFailureActionOverrides[0].namespaces"}},
		{name: "only enforcing overrides", template: enforceOverridesPolicy,
			gone: []string{".spec.rules[0].validate.failureActionOverrides", ".spec.validationFailureActionOverrides"}},
		{name: "verifyImages only", template: verifyImagesOnlyPolicy},
		{name: "ValidatingPolicy", template: strings.Replace(validatingPolicy, "[Audit, Warn]", "[Deny]", 1)},
		{name: "NamespacedImageValidatingPolicy", template: imageValidatingPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := fleetPolicy(t, "p", tt.template)
			before, err := FleetPolicy("hub-a", fp, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(enforcingActions(before.Object, "")) == 0 {
				t.Fatal("the template enforces nothing: the case proves nothing")
			}
			got, err := FleetPolicy("hub-a", fp, mode(policyhubv1.ModeAudit))
			if err != nil {
				t.Fatal(err)
			}
			if found := enforcingActions(got.Object, ""); len(found) > 0 {
				t.Errorf("Audit left enforcement in place: %v", found)
			}
			for _, p := range tt.kept {
				if !hasPath(got.Object, p) {
					t.Errorf("%s is gone: Audit must keep the Audit overrides", p)
				}
			}
			for _, p := range tt.gone {
				if hasPath(got.Object, p) {
					t.Errorf("%s is still there with no override left in it", p)
				}
			}
		})
	}
}

// Enforce keeps the template's overrides: an Audit override is an exemption its author chose
// for some namespaces, and Enforce there too would override that choice.
func TestSetModeEnforceKeepsOverrides(t *testing.T) {
	got, err := FleetPolicy("hub-a", fleetPolicy(t, "p", overridesClusterPolicy), mode(policyhubv1.ModeEnforce))
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(got.Object, "spec", "rules")
	overrides, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "validate", "failureActionOverrides")
	policyWide, _, _ := unstructured.NestedSlice(got.Object, "spec", "validationFailureActionOverrides")
	if len(overrides) != 2 || len(policyWide) != 2 {
		t.Errorf("overrides after Enforce: rule %v, policy-wide %v; want the template's two each", overrides, policyWide)
	}
	images, _, _ := unstructured.NestedSlice(rules[1].(map[string]any), "verifyImages")
	for i, e := range images {
		if a := e.(map[string]any)["failureAction"]; a != "Enforce" {
			t.Errorf("verifyImages[%d].failureAction = %v, want Enforce", i, a)
		}
	}
}

// hasPath says whether the object has the field at path (enforcingActions' notation).
func hasPath(obj map[string]any, path string) bool {
	var cur any = obj
	for _, part := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		name, index := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			name = part[:i]
			if _, err := fmt.Sscanf(part[i:], "[%d]", &index); err != nil {
				return false
			}
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[name]; !ok {
			return false
		}
		if index >= 0 {
			list, ok := cur.([]any)
			if !ok || index >= len(list) {
				return false
			}
			cur = list[index]
		}
	}
	return true
}
