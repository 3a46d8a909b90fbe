package tocel

import (
	"reflect"
	"strings"
	"testing"
)

func TestRefusals(t *testing.T) {
	cases := map[string]struct{ validate, reason string }{
		"existence anchor": {`      pattern: {spec: {<(hostNetwork): true}}
`, "rule r: validate.pattern.spec.<(hostNetwork): existence anchor <(hostNetwork) is not converted"},
		"global anchor under a condition anchor": {`      pattern: {spec: {containers: [{(name): a, ^(image): x}]}}
`, "anchor ^(image) is not converted"},
		"global anchor": {`      pattern: {spec: {^(hostNetwork): true}}
`, "global anchor ^(hostNetwork) is not converted"},
		"quantity bound": {`      pattern: {spec: {containers: [{resources: {limits: {memory: "<=1Gi"}}}]}}
`, "pattern operator <= in \"<=1Gi\" is not converted (only integer bounds"},
		"quantity literal": {`      pattern: {spec: {containers: [{resources: {limits: {cpu: "1"}}}]}}
`, `Kyverno compares "1" as a quantity`},
		"range": {`      pattern: {spec: {=(priority): "1-5"}}
`, `pattern range "1-5" is not converted`},
		"variable in pattern": {`      pattern: {metadata: {name: "{{ request.namespace }}"}}
`, "variable \"{{ request.namespace }}\" in a pattern is not converted"},
		"variable in message": {`      message: "bad {{ request.object.metadata.name }}"
      pattern: {metadata: {name: "?*"}}
`, "variables in the message are not converted"},
		"deny on a request.object path": {`      deny:
        conditions:
          any:
          - {key: "{{ request.object.spec.hostNetwork }}", operator: Equals, value: true}
`, "JMESPath beyond element.keys(@) is not converted"},
		"JMESPath function in foreach": {`      foreach:
      - list: request.object.spec.containers
        deny:
          conditions:
            any:
            - {key: "{{ to_upper(element.name) }}", operator: Equals, value: FOO}
`, "JMESPath function to_upper in \"{{ to_upper(element.name) }}\" is not converted"},
		"reference in a pattern": {`      pattern: {spec: {containers: [{name: "$(../image)"}]}}
`, "reference \"$(../image)\" in a pattern is not converted"},
		"podSecurity": {`      podSecurity: {level: baseline, version: latest}
`, "validate.podSecurity: podSecurity is not converted"},
		"foreach list beyond request.object": {`      foreach:
      - list: "request.object.spec.containers[].ports[]"
        pattern: {containerPort: "?*"}
`, "is not converted (only request.object.<field>...)"},
		"wildcard key": {`      pattern: {metadata: {labels: {"app.*": "?*"}}}
`, "wildcard key \"app.*\" is not converted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := ConvertYAML([]byte(podPolicy(tc.validate)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Policy != nil {
				t.Fatalf("converted, want refused with %q", tc.reason)
			}
			if got := strings.Join(res.Report.Reasons(), "\n"); !strings.Contains(got, tc.reason) {
				t.Fatalf("reasons %q, want one containing %q", got, tc.reason)
			}
		})
	}
}

const policyHead = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
`

func TestPolicyLevel(t *testing.T) {
	cases := map[string]struct {
		policy string
		want   map[string]any // dotted spec path → value
		reason string
	}{
		"audit default, background copied, autogen default": {policyHead + `spec:
  background: false
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, map[string]any{
			"validationActions":                  []any{"Audit"},
			"evaluation.background.enabled":      false,
			"autogen.podControllers.controllers": []any{"daemonsets", "deployments", "jobs", "statefulsets", "replicasets", "cronjobs"},
			"matchConstraints.resourceRules":     []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"pods"}, "operations": []any{"CREATE", "UPDATE"}}},
		}, ""},
		"enforce with allowExistingViolations false → Deny; autogen none": {`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
  annotations: {pod-policies.kyverno.io/autogen-controllers: none}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {allowExistingViolations: false, pattern: {metadata: {name: "?*"}}}
`, map[string]any{
			"validationActions":                  []any{"Deny"},
			"autogen.podControllers.controllers": []any{},
		}, ""},
		"emitWarning with Enforce → refused": {policyHead + `spec:
  validationFailureAction: Enforce
  emitWarning: true
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {allowExistingViolations: false, pattern: {metadata: {name: "?*"}}}
`, nil, "spec.emitWarning with Enforce is not converted"},
		"rule-level failureAction wins": {policyHead + `spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Audit, pattern: {metadata: {name: "?*"}}}
`, map[string]any{"validationActions": []any{"Audit"}}, ""},
		"precondition on request.operation → operations, background off": {policyHead + `spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    preconditions:
      all:
      - {key: "{{request.operation || 'BACKGROUND'}}", operator: AnyIn, value: [UPDATE]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, map[string]any{
			"evaluation.background.enabled":  false,
			"matchConstraints.resourceRules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"pods"}, "operations": []any{"UPDATE"}}},
		}, ""},
		"precondition letting CREATE through → background on (Kyverno's scans evaluate CREATE)": {policyHead + `spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    preconditions:
      all:
      - {key: "{{request.operation || 'BACKGROUND'}}", operator: AnyIn, value: [CREATE, UPDATE]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, map[string]any{
			"evaluation.background.enabled":  true,
			"matchConstraints.resourceRules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"pods"}, "operations": []any{"CREATE", "UPDATE"}}},
		}, ""},
		"namespaces → namespaceSelector; kinds grouped": {policyHead + `spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Deployment, Service, StatefulSet], namespaces: [prod]}}]}
    exclude: {any: [{resources: {namespaces: [kube-system]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, map[string]any{
			"matchConstraints.namespaceSelector": map[string]any{"matchExpressions": []any{
				map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"prod"}},
				map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system"}},
			}},
			"matchConstraints.resourceRules": []any{
				map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"services"}, "operations": []any{"CREATE", "UPDATE"}},
				map[string]any{"apiGroups": []any{"apps"}, "apiVersions": []any{"v1"}, "resources": []any{"deployments", "statefulsets"}, "operations": []any{"CREATE", "UPDATE"}},
			},
		}, ""},
		"rules with different matches": {policyHead + `spec:
  rules:
  - name: a
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
  - name: b
    match: {any: [{resources: {kinds: [Service]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, nil, "rule b differs from rule a in match"},
		"unknown kind": {policyHead + `spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Widget]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, nil, `kind "Widget" is not in the converter's kind table`},
		"subjects": {policyHead + `spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: x}]}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, nil, "subjects is not converted"},
		"context": {policyHead + `spec:
  rules:
  - name: r
    context: [{name: x, apiCall: {urlPath: /api/v1/pods}}]
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`, nil, "rule r: context: context apiCall x is not converted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := ConvertYAML([]byte(tc.policy))
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				if res.Policy != nil {
					t.Fatalf("converted, want refused with %q", tc.reason)
				}
				if got := strings.Join(res.Report.Reasons(), "\n"); !strings.Contains(got, tc.reason) {
					t.Fatalf("reasons %q, want one containing %q", got, tc.reason)
				}
				return
			}
			if res.Policy == nil {
				t.Fatalf("refused: %q", res.Report.Reasons())
			}
			if res.Policy.GetKind() != KindCluster || res.Policy.GetAPIVersion() != APIVersion {
				t.Errorf("got %s %s", res.Policy.GetAPIVersion(), res.Policy.GetKind())
			}
			spec := res.Policy.Object["spec"]
			for path, want := range tc.want {
				got := spec
				for _, k := range strings.Split(path, ".") {
					got = got.(map[string]any)[k]
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", path, got, want)
				}
			}
		})
	}
}

// Kyverno's allowExistingViolations (default true, Enforce only) lets an UPDATE through when
// the old object fails the rule too; the converted expression says the same.
func TestAllowExistingViolations(t *testing.T) {
	ev := newEvaluator(t)
	for _, validate := range []string{
		`{pattern: {spec: {=(hostNetwork): false}}}`,
		`{foreach: [{list: request.object.spec.containers, pattern: {image: "!*:latest"}}]}`,
	} {
		policy := policyHead + `spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: ` + validate + "\n"
		expr := convertOne(t, policy)
		good := map[string]any{"spec": map[string]any{"hostNetwork": false, "containers": []any{map[string]any{"image": "a:1"}}}}
		bad := map[string]any{"spec": map[string]any{"hostNetwork": true, "containers": []any{map[string]any{"image": "a:latest"}}}}
		for _, c := range []struct {
			op       string
			obj, old map[string]any
			want     bool
		}{
			{"CREATE", good, nil, true},
			{"CREATE", bad, nil, false},
			{"UPDATE", bad, good, false}, // a new violation
			{"UPDATE", bad, bad, true},   // an existing violation, allowed as Kyverno allows it
			{"UPDATE", good, bad, true},
		} {
			got, err := ev.evalRequest(expr, c.op, c.obj, c.old)
			if err != nil {
				t.Fatalf("%s: %v", validate, err)
			}
			if got != c.want {
				t.Errorf("%s: %s new=%v old=%v: pass=%v, want %v", validate, c.op, c.obj, c.old, got, c.want)
			}
		}
	}
}

// names filters become matchConditions on the name (the old object's on DELETE); legacy
// autogen does not apply to them, so neither does the converted policy's.
func TestNames(t *testing.T) {
	ev := newEvaluator(t)
	res, err := ConvertYAML([]byte(policyHead + `spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod], names: ["web-*", db]}}]}
    exclude: {any: [{resources: {names: [web-canary]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`))
	if err != nil || res.Policy == nil {
		t.Fatalf("err %v, reasons %q", err, res.Report.Reasons())
	}
	spec := res.Policy.Object["spec"].(map[string]any)
	if got := spec["autogen"].(map[string]any)["podControllers"].(map[string]any)["controllers"]; !reflect.DeepEqual(got, []any{}) {
		t.Errorf("controllers = %v, want []", got)
	}
	conds := spec["matchConditions"].([]any)
	for name, want := range map[string]bool{"web-1": true, "db": true, "dbx": false, "web-canary": false, "": false} {
		obj := map[string]any{"metadata": map[string]any{}}
		if name != "" {
			obj["metadata"].(map[string]any)["name"] = name
		}
		all := true
		for _, c := range conds {
			ok, err := ev.eval(c.(map[string]any)["expression"].(string), obj)
			if err != nil {
				t.Fatal(err)
			}
			all = all && ok
		}
		if all != want {
			t.Errorf("name %q: matched=%v, want %v", name, all, want)
		}
	}
	// On DELETE the object is null and the old object's name is matched.
	ok, err := ev.evalRequest(conds[0].(map[string]any)["expression"].(string), "DELETE", nil, map[string]any{"metadata": map[string]any{"name": "db"}})
	if err != nil || !ok {
		t.Errorf("DELETE of db: matched=%v, err %v", ok, err)
	}
}

func TestNamespacedPolicy(t *testing.T) {
	res, err := ConvertYAML([]byte(`apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: p, namespace: shop}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`))
	if err != nil || res.Policy == nil {
		t.Fatalf("err %v, reasons %q", err, res.Report.Reasons())
	}
	if res.Policy.GetKind() != KindNamespaced || res.Policy.GetNamespace() != "shop" {
		t.Errorf("got %s %s/%s", res.Policy.GetKind(), res.Policy.GetNamespace(), res.Policy.GetName())
	}
}

func TestAutogenRewrite(t *testing.T) {
	in := "has(object.spec.containers) && object.metadata.name != '' && oldObject.spec.x"
	if got, want := autogenRewrite(in, "deployments"), "has(object.spec.template.spec.containers) && object.spec.template.metadata.name != '' && oldObject.spec.template.spec.x"; got != want {
		t.Errorf("deployments: %s", got)
	}
	if got, want := autogenRewrite("object.spec.a", "cronjobs"), "object.spec.jobTemplate.spec.template.spec.a"; got != want {
		t.Errorf("cronjobs: %s", got)
	}
}
