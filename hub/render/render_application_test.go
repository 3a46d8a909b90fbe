package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

func newApplicationPolicy(t *testing.T, namespace, name, specYAML string) *policyhubv1.ApplicationPolicy {
	t.Helper()
	ap := &policyhubv1.ApplicationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := yaml.Unmarshal([]byte(specYAML), &ap.Spec); err != nil {
		t.Fatal(err)
	}
	return ap
}

// The rules of the rule-based cases: a validate rule whose own failure actions the mode replaces,
// with an exclude kept as given, and a second validate rule with a variable.
const limitRules = `
rules:
- name: require-limits
  exclude:
    any:
    - resources:
        names: [debug-*]
  validate:
    failureAction: Enforce
    failureActionOverrides:
    - action: Audit
      namespaces: [dev]
    message: set memory limits
    pattern:
      spec:
        template:
          spec:
            containers:
            - resources:
                limits:
                  memory: "?*"
- name: need-team
  context:
  - name: team
    variable: {jmesPath: "request.object.metadata.labels.team || ''"}
  validate:
    message: label team
    deny:
      conditions:
        any:
        - {key: "{{ team }}", operator: Equals, value: ""}
`

const replicaValidations = `
validations:
- expression: "object.spec.replicas <= 5"
  message: at most 5 replicas
- expression: "'team' in object.metadata.labels"
  messageExpression: "'team label missing on ' + object.metadata.name"
  reason: Invalid
`

func TestApplicationPolicy(t *testing.T) {
	tests := []struct {
		name      string // also the golden file's name: testdata/application-<name>.yaml
		apName    string
		namespace string // the target namespace
		spec      string
	}{
		{name: "kinds-audit", apName: "shop-limits", namespace: "shop-prod", spec: `
application: shop
scope:
  kinds: [Deployment, apps/v1/StatefulSet]
` + limitRules},
		{name: "resources-enforce", apName: "shop-limits", namespace: "shop", spec: `
application: shop
mode: Enforce
scope:
  resources:
  - {kind: Deployment, name: web}
  - {kind: StatefulSet, name: db}
` + limitRules},
		{name: "kinds-and-resources", apName: "shop-limits", namespace: "shop", spec: `
application: shop
mode: Audit
scope:
  kinds: [Deployment]
  resources:
  - {kind: StatefulSet, name: db}
  - {kind: Deployment, name: web.front}
` + limitRules},
		{name: "validations-kinds", apName: "shop-replicas", namespace: "shop", spec: `
application: shop
mode: Enforce
scope:
  kinds: [Deployment, apps/v1/StatefulSet, Pod, autoscaling/v2/HorizontalPodAutoscaler]
` + replicaValidations},
		{name: "validations-resource", apName: "shop-replicas", namespace: "shop", spec: `
application: shop
scope:
  resources:
  - {kind: Deployment, name: web}
` + replicaValidations},
		{name: "custom-label", apName: "shop-limits", namespace: "shop", spec: `
application: shop-v2
applicationLabel: app.kubernetes.io/instance
mode: Enforce
scope:
  kinds: [Deployment]
` + limitRules},
		{name: "long-name-hashed", apName: strings.Repeat("a", 70), namespace: "shop", spec: `
application: shop
scope:
  kinds: [Deployment]
  resources:
  - {kind: Deployment, name: web-frontend-with-a-long-name}
` + replicaValidations},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap := newApplicationPolicy(t, "shop", tt.apName, tt.spec)
			got, err := ApplicationPolicy("hub-a", ap, tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range got {
				name := obj.GetName()
				if len(validation.IsDNS1123Label(name)) > 0 {
					t.Errorf("generated name %q is not a DNS-1123 label", name)
				}
				if obj.GetNamespace() != tt.namespace {
					t.Errorf("%s is in namespace %q, want the target %q", name, obj.GetNamespace(), tt.namespace)
				}
			}
			var out []byte
			for _, obj := range got {
				doc, err := yaml.Marshal(obj.Object)
				if err != nil {
					t.Fatal(err)
				}
				out = append(append(out, "---\n"...), doc...)
			}
			golden := filepath.Join("testdata", "application-"+tt.name+".yaml")
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

// What each case's objects are, independently of the goldens: kinds, names and order.
func TestApplicationPolicyObjects(t *testing.T) {
	ap := newApplicationPolicy(t, "shop", "shop-limits", `
application: shop
scope:
  kinds: [Deployment]
  resources:
  - {kind: StatefulSet, name: db}
  - {kind: apps/v1/Deployment, name: web}
`+limitRules)
	got, err := ApplicationPolicy("hub-a", ap, "shop")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kyverno.io/v1 Policy shop-limits", "kyverno.io/v1 Policy shop-limits-statefulset-db", "kyverno.io/v1 Policy shop-limits-deployment-web"}
	if ids := objectIDs(got); strings.Join(ids, "\n") != strings.Join(want, "\n") {
		t.Errorf("objects = %q, want %q", ids, want)
	}
	for _, obj := range got {
		labels := obj.GetLabels()
		if labels[policyhubv1.LabelManagedBy] != "hub-a" || labels[policyhubv1.LabelSourceKind] != "ApplicationPolicy" ||
			labels[policyhubv1.LabelSourceNamespace] != "shop" || labels[policyhubv1.LabelSourceName] != "shop-limits" {
			t.Errorf("%s has labels %v, want the owner's", obj.GetName(), labels)
		}
		annotations := obj.GetAnnotations()
		if annotations[policyhubv1.AnnotationSource] != "ApplicationPolicy/shop/shop-limits" {
			t.Errorf("%s has source %q", obj.GetName(), annotations[policyhubv1.AnnotationSource])
		}
		if hash, err := ContentHash(obj); err != nil || annotations[policyhubv1.AnnotationContentHash] != hash {
			t.Errorf("%s has content hash %q, want %q (%v)", obj.GetName(), annotations[policyhubv1.AnnotationContentHash], hash, err)
		}
	}

	ap.Spec.Rules = nil
	ap.Spec.Validations = []policyhubv1.Validation{{Expression: "true"}}
	got, err = ApplicationPolicy("hub-a", ap, "shop")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"policies.kyverno.io/v1 NamespacedValidatingPolicy shop-limits",
		"policies.kyverno.io/v1 NamespacedValidatingPolicy shop-limits-statefulset-db",
		"policies.kyverno.io/v1 NamespacedValidatingPolicy shop-limits-deployment-web"}
	if ids := objectIDs(got); strings.Join(ids, "\n") != strings.Join(want, "\n") {
		t.Errorf("objects = %q, want %q", ids, want)
	}
}

func objectIDs(objs []*unstructured.Unstructured) []string {
	ids := make([]string, 0, len(objs))
	for _, obj := range objs {
		ids = append(ids, obj.GetAPIVersion()+" "+obj.GetKind()+" "+obj.GetName())
	}
	return ids
}

// The same input renders the same objects and hashes, and the input is never modified.
func TestApplicationPolicyDeterministic(t *testing.T) {
	for _, extra := range []string{limitRules, replicaValidations} {
		ap := newApplicationPolicy(t, "shop", "p", `
application: shop
scope:
  kinds: [Deployment, Pod]
  resources: [{kind: Deployment, name: web}, {kind: Pod, name: one}]
`+extra)
		orig := ap.DeepCopy()
		first, err := ApplicationPolicy("hub-a", ap, "shop")
		if err != nil {
			t.Fatal(err)
		}
		firstYAML := mustYAML(t, first)
		for range 20 {
			again, err := ApplicationPolicy("hub-a", ap, "shop")
			if err != nil {
				t.Fatal(err)
			}
			if got := mustYAML(t, again); got != firstYAML {
				t.Fatalf("render changed between identical inputs:\n%s\nthen\n%s", firstYAML, got)
			}
		}
		if mustYAML(t, []*unstructured.Unstructured{{Object: toMap(t, ap)}}) != mustYAML(t, []*unstructured.Unstructured{{Object: toMap(t, orig)}}) {
			t.Errorf("render modified the ApplicationPolicy")
		}
		// The hash follows the content: another mode is another hash.
		ap.Spec.Mode = policyhubv1.ModeEnforce
		enforced, err := ApplicationPolicy("hub-a", ap, "shop")
		if err != nil {
			t.Fatal(err)
		}
		for i := range enforced {
			h1 := first[i].GetAnnotations()[policyhubv1.AnnotationContentHash]
			h2 := enforced[i].GetAnnotations()[policyhubv1.AnnotationContentHash]
			if h1 == h2 {
				t.Errorf("%s: Audit and Enforce renders have the same hash %s", first[i].GetName(), h1)
			}
		}
	}
}

func mustYAML(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, obj := range objs {
		out, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.String()
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestApplicationPolicyErrors(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		hubID     string // "hub-a" unless set
		namespace string // "shop" unless set
		wantErr   []string
	}{
		{name: "rule sets match", spec: `
application: shop
scope: {kinds: [Deployment]}
rules:
- name: limits
  match: {any: [{resources: {kinds: [Pod]}}]}
  validate: {pattern: {spec: {}}}
`, wantErr: []string{`rule "limits" sets match: an ApplicationPolicy's scope decides what its rules apply to; remove match`}},
		{name: "no rules and no validations", spec: `
application: shop
scope: {kinds: [Deployment]}
`, wantErr: []string{"nothing to enforce: set rules or validations"}},
		{name: "rules and validations", spec: `
application: shop
scope: {kinds: [Deployment]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
validations: [{expression: "true"}]
`, wantErr: []string{"spec.rules and spec.validations are both set: give one of them"}},
		{name: "no scope", spec: `
application: shop
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{"spec.scope is empty: list the kinds and/or the resources"}},
		{name: "empty scope", spec: `
application: shop
scope: {kinds: [], resources: []}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{"spec.scope is empty: list the kinds and/or the resources"}},
		{name: "unknown kind for validations", spec: `
application: shop
scope: {kinds: [Deployment, Widget]}
validations: [{expression: "true"}]
`, wantErr: []string{`kind "Widget" is not one validations can apply to`, "Deployment (apps/v1)", "PodDisruptionBudget (policy/v1)", "spec.rules for other kinds"}},
		{name: "unknown resource kind for validations", spec: `
application: shop
scope: {resources: [{kind: Widget, name: w}]}
validations: [{expression: "true"}]
`, wantErr: []string{`kind "Widget" is not one validations can apply to`}},
		{name: "wrong version for validations", spec: `
application: shop
scope: {kinds: [apps/v1beta1/Deployment]}
validations: [{expression: "true"}]
`, wantErr: []string{`kind "apps/v1beta1/Deployment" is not one validations can apply to`}},
		{name: "empty application", spec: `
scope: {kinds: [Deployment]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{"spec.application is empty: set it to the name of the application"}},
		{name: "rule without name", spec: `
application: shop
scope: {kinds: [Deployment]}
rules:
- name: ok
  validate: {pattern: {spec: {}}}
- validate: {pattern: {spec: {}}}
`, wantErr: []string{"spec.rules[1] has no name: give every rule a name"}},
		{name: "duplicate rule names", spec: `
application: shop
scope: {kinds: [Deployment]}
rules:
- {name: r, validate: {pattern: {spec: {}}}}
- {name: r, validate: {pattern: {metadata: {}}}}
`, wantErr: []string{`spec.rules[0] and spec.rules[1] are both named "r": rule names must be unique`}},
		{name: "resources with the same policy name", spec: `
application: shop
scope: {resources: [{kind: Deployment, name: web}, {kind: apps/v1/Deployment, name: web}]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{`spec.scope.resources[0] (Deployment web) and spec.scope.resources[1] (apps/v1/Deployment web) both render to the policy name "p-deployment-web"`}},
		{name: "wildcard resource name", spec: `
application: shop
scope: {resources: [{kind: Deployment, name: web-*}]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{"spec.scope.resources[0] (Deployment web-*): the name has a wildcard", "spec.scope.kinds"}},
		{name: "bad mode", spec: `
application: shop
mode: Block
scope: {kinds: [Deployment]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{`spec.mode "Block": want Audit or Enforce`}},
		{name: "bad hub id", hubID: "hub/a", spec: `
application: shop
scope: {kinds: [Deployment]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{`hub id "hub/a" is not a valid label value`}},
		{name: "no target namespace", namespace: "-", spec: `
application: shop
scope: {kinds: [Deployment]}
rules: [{name: r, validate: {pattern: {spec: {}}}}]
`, wantErr: []string{"no target namespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hubID, namespace := tt.hubID, tt.namespace
			if hubID == "" {
				hubID = "hub-a"
			}
			switch namespace {
			case "":
				namespace = "shop"
			case "-":
				namespace = ""
			}
			got, err := ApplicationPolicy(hubID, newApplicationPolicy(t, "shop", "p", tt.spec), namespace)
			if err == nil {
				t.Fatalf("no error, rendered %d objects", len(got))
			}
			if !strings.HasPrefix(err.Error(), "render ApplicationPolicy shop/p: ") {
				t.Errorf("error %q does not name the ApplicationPolicy", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want one containing %q", err, want)
				}
			}
		})
	}
}

func TestCELString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"web", `'web'`},
		{"it's", `'it\'s'`},
		{`a\b`, `'a\\b'`},
		{"a\nb", `'a\x0ab'`},
	}
	for _, tt := range tests {
		if got := celString(tt.in); got != tt.want {
			t.Errorf("celString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// A tenant's rules validate only: a rule that mutates, generates, verifies images or reads outside
// its namespace (at any depth, foreach included) is refused at render, whatever admission let
// through, so it is never dispatched.
func TestApplicationPolicyRulesValidateOnly(t *testing.T) {
	for _, tt := range []struct{ name, rule, want string }{
		{"mutate", `{name: r, mutate: {patchStrategicMerge: {metadata: {labels: {+(team): x}}}}}`, "no validate block"},
		{"mutate beside validate", `{name: r, validate: {deny: {}}, mutate: {patchStrategicMerge: {}}}`, "rule.mutate is not allowed"},
		{"generate", `{name: r, validate: {deny: {}}, generate: {kind: NetworkPolicy}}`, "rule.generate is not allowed"},
		{"verifyImages", `{name: r, validate: {deny: {}}, verifyImages: [{imageReferences: ["*"]}]}`, "rule.verifyImages is not allowed"},
		{"apiCall context", `{name: r, context: [{name: x, apiCall: {urlPath: /api/v1/secrets}}], validate: {deny: {}}}`, "rule.context[0].apiCall is not allowed"},
		{"configMap context", `{name: r, context: [{name: x, configMap: {name: c, namespace: kube-system}}], validate: {deny: {}}}`, "rule.context[0].configMap is not allowed"},
		{"apiCall inside foreach", `{name: r, validate: {foreach: [{list: "a", context: [{name: x, apiCall: {urlPath: /api}}], deny: {}}]}}`, "rule.validate.foreach[0].context[0].apiCall is not allowed"},
		{"cel params", `{name: r, validate: {cel: {paramKind: {kind: ConfigMap}, expressions: []}}}`, "rule.validate.cel.paramKind is not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ap := newApplicationPolicy(t, "shop", "p", "application: shop\nscope: {kinds: [Deployment]}\nrules:\n- "+tt.rule+"\n")
			got, err := ApplicationPolicy("hub-a", ap, "shop")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render = %d objects, error %v; want an error containing %q", len(got), err, tt.want)
			}
		})
	}
}

// A tenant's CEL stays in the sandbox (hub/render/tenantcel): a validation, a message
// expression, a rule's CEL precondition, or its validate.cel expressions, variables and audit
// annotations that call Kyverno's libraries are refused at render, naming the field and the
// function; so is validate.manifests (Kyverno fetches keys to verify it), and a validate field
// the hub does not know.
func TestApplicationPolicyTenantCEL(t *testing.T) {
	const validations, rules = "validations:\n- ", "rules:\n- "
	for _, tt := range []struct{ name, spec, want string }{
		{"validation", validations + `{expression: "http.Get('http://192.0.2.2/').status == 200"}`,
			"spec.validations[0].expression: calls http.Get, which a tenant's CEL may not (allowed: "},
		{"message expression", validations + `{expression: "true", messageExpression: "string(resource.List('v1', 'secrets', ''))"}`,
			"spec.validations[0].messageExpression: calls resource.List"},
		{"second validation", validations + `{expression: "true"}` + "\n- " + `{expression: "globalContext.Get('x', '') != null"}`,
			"spec.validations[1].expression: calls globalContext.Get"},
		{"cel precondition", rules + `{name: r, celPreconditions: [{name: p, expression: "image.GetMetadata(object.spec.image) != null"}], validate: {deny: {}}}`,
			"spec.rules[0].celPreconditions[0].expression: calls image.GetMetadata"},
		{"validate.cel expression", rules + `{name: r, validate: {cel: {expressions: [{expression: "true"}, {expression: "http.Post('http://x', object, {}) != null"}]}}}`,
			"spec.rules[0].validate.cel.expressions[1].expression: calls http.Post"},
		{"validate.cel message expression", rules + `{name: r, validate: {cel: {expressions: [{expression: "true", messageExpression: "json.marshal(object)"}]}}}`,
			"spec.rules[0].validate.cel.expressions[0].messageExpression: calls json.marshal"},
		{"validate.cel variable", rules + `{name: r, validate: {cel: {variables: [{name: s, expression: "resource.Get('v1', 'secrets', 'kube-system', 't')"}], expressions: [{expression: "true"}]}}}`,
			"spec.rules[0].validate.cel.variables[0].expression: calls resource.Get"},
		{"validate.cel audit annotation", rules + `{name: r, validate: {cel: {auditAnnotations: [{key: k, valueExpression: "string(authorizer.group('').resource('secrets').check('get').allowed())"}], expressions: [{expression: "true"}]}}}`,
			"spec.rules[0].validate.cel.auditAnnotations[0].valueExpression: calls authorizer.group"},
		{"validate.cel not an object", rules + `{name: r, validate: {cel: "http.Get('x')"}}`,
			"spec.rules[0].validate.cel: want an object"},
		{"manifests", rules + `{name: r, validate: {manifests: {attestors: [{entries: [{keyless: {rekor: {url: "https://rekor.example"}}}]}]}}}`,
			"spec.rules[0].validate.manifests is not allowed: Kyverno would fetch"},
		{"validate.cel expressions not a list", rules + `{name: r, validate: {cel: {expressions: {expression: "http.Get('x')"}}}}`,
			"spec.rules[0].validate.cel.expressions: want a list"},
		{"validate.cel expression not a string", rules + `{name: r, validate: {cel: {expressions: [{expression: [http.Get]}]}}}`,
			"spec.rules[0].validate.cel.expressions[0].expression: want a CEL expression (a string)"},
		{"too much CEL", validations + strings.Repeat(`{expression: "object.metadata.name != '`+strings.Repeat("x", 4000)+`'"}`+"\n- ", 17) + `{expression: "true"}`,
			"spec.validations[16].expression: the ApplicationPolicy's CEL is over 65536 bytes in all"},
		{"unknown validate field", rules + `{name: r, validate: {deny: {}, fetchSomething: {url: "https://x"}}}`,
			"spec.rules[0].validate.fetchSomething is not a validate field an ApplicationPolicy may use"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ap := newApplicationPolicy(t, "shop", "p", "application: shop\nscope: {kinds: [Deployment]}\n"+tt.spec+"\n")
			got, err := ApplicationPolicy("hub-a", ap, "shop")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render = %d objects, error %v; want an error containing %q", len(got), err, tt.want)
			}
		})
	}
	// The same places, with CEL that stays inside: rendered.
	ap := newApplicationPolicy(t, "shop", "p", `
application: shop
scope: {kinds: [Deployment]}
rules:
- name: r
  celPreconditions: [{name: p, expression: "has(object.metadata.labels)"}]
  validate:
    cel:
      variables: [{name: images, expression: "object.spec.template.spec.containers.map(c, c.image)"}]
      expressions: [{expression: "variables.images.all(i, !i.endsWith(':latest'))", messageExpression: "'latest in ' + object.metadata.name"}]
      auditAnnotations: [{key: k, valueExpression: "string(size(variables.images))"}]
`)
	if _, err := ApplicationPolicy("hub-a", ap, "shop"); err != nil {
		t.Fatalf("CEL within the sandbox refused: %v", err)
	}
}

// ApplicationPolicyTargets refuses the whole ApplicationPolicy as Invalid (so it is Stalled and
// dispatched nowhere) when a validation calls http.Get.
func TestApplicationPolicyTargetsRefuseTenantCEL(t *testing.T) {
	ap := newApplicationPolicy(t, "shop", "p", `
application: shop
scope: {kinds: [Deployment]}
validations: [{expression: "http.Get('http://192.0.2.2/').status == 200"}]
`)
	targets, err := ApplicationPolicyTargets("hub-a", ap, []placement.AppTarget{{Cluster: "cluster-1", Namespace: "shop"}})
	invalid, ok := AsInvalid(err)
	if !ok || !strings.Contains(invalid.Error(), "spec.validations[0].expression: calls http.Get") {
		t.Fatalf("targets %v, error %v; want an InvalidError naming http.Get", targets, err)
	}
}
