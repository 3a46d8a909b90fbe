package tocel

import (
	"strings"
	"testing"
)

// podPolicy wraps a validate block (YAML, indented for a rule's validate:) in a ClusterPolicy
// matching Pods.
func podPolicy(validate string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
spec:
  validationFailureAction: Audit
  rules:
  - name: r
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
` + validate
}

// convertOne converts a policy that must convert to one validation and returns its expression.
func convertOne(t *testing.T, policy string) string {
	t.Helper()
	res, err := ConvertYAML([]byte(policy))
	if err != nil {
		t.Fatalf("convert: %v", err)
	}
	if res.Policy == nil {
		t.Fatalf("refused: %q", res.Report.Reasons())
	}
	v := res.Policy.Object["spec"].(map[string]any)["validations"].([]any)
	return v[0].(map[string]any)["expression"].(string)
}

func TestPatternVerdicts(t *testing.T) {
	ev := newEvaluator(t)
	cases := []struct {
		name, validate string
		verdicts       map[string]bool // resource (YAML) → pass
	}{{
		name: "wildcard ?* needs a non-empty value",
		validate: `      pattern:
        metadata:
          labels:
            app.kubernetes.io/name: "?*"
`,
		verdicts: map[string]bool{
			`metadata: {labels: {app.kubernetes.io/name: web}}`: true,
			`metadata: {labels: {app.kubernetes.io/name: ""}}`:  false,
			`metadata: {labels: {other: x}}`:                    false,
			`metadata: {name: x}`:                               false,
			`metadata: {labels: {app.kubernetes.io/name: 3}}`:   true, // Kyverno renders numbers
		},
	}, {
		name: "list pattern applies to every element; * and ! wildcards",
		validate: `      pattern:
        spec:
          containers:
          - image: "!*:latest"
`,
		verdicts: map[string]bool{
			`spec: {containers: [{image: "nginx:1.2"}, {image: "a:b"}]}`:      true,
			`spec: {containers: [{image: "nginx:1.2"}, {image: "a:latest"}]}`: false,
			`spec: {containers: [{name: "noimage"}]}`:                         false, // missing key fails
			`spec: {containers: []}`:                                          true,
			`spec: {}`:                                                        false,
		},
	}, {
		name: "=() checks only when present; nested",
		validate: `      pattern:
        spec:
          containers:
          - =(securityContext):
              =(privileged): "false"
`,
		verdicts: map[string]bool{
			`spec: {containers: [{name: a}]}`:                                    true,
			`spec: {containers: [{securityContext: {}}]}`:                        true,
			`spec: {containers: [{securityContext: {privileged: false}}]}`:       true,
			`spec: {containers: [{securityContext: {privileged: true}}]}`:        false,
			`spec: {containers: [{securityContext: {privileged: "false"}}]}`:     true,
			`spec: {containers: [{securityContext: {runAsUser: 1}}, {name: b}]}`: true,
		},
	}, {
		name: "X() needs the key absent",
		validate: `      pattern:
        spec:
          =(volumes):
          - X(hostPath): "null"
`,
		verdicts: map[string]bool{
			`spec: {}`: true,
			`spec: {volumes: [{name: a, emptyDir: {}}]}`:                   true,
			`spec: {volumes: [{name: a, hostPath: {path: /}}]}`:            false,
			`spec: {volumes: [{name: a}, {name: b, hostPath: {path: /}}]}`: false,
		},
	}, {
		name: "| alternatives and integers",
		validate: `      pattern:
        spec:
          =(restartPolicy): "Always | Never"
          =(priority): 0
`,
		verdicts: map[string]bool{
			`spec: {restartPolicy: Always}`:    true,
			`spec: {restartPolicy: OnFailure}`: false,
			`spec: {priority: 0}`:              true,
			`spec: {priority: 1}`:              false,
			`spec: {priority: "0"}`:            true,
		},
	}, {
		name: "comparisons with an integer bound: ints, quantities, durations, missing reads 0",
		validate: `      pattern:
        spec:
          =(runAsUser): ">0"
          priority: ">=0 & <10"
`,
		verdicts: map[string]bool{
			`spec: {runAsUser: 1, priority: 3}`:      true,
			`spec: {runAsUser: 0, priority: 3}`:      false,
			`spec: {runAsUser: "5", priority: 3}`:    true,  // a quantity
			`spec: {runAsUser: "5s", priority: 3}`:   true,  // a duration, as the bound 0 is one
			`spec: {runAsUser: "abc", priority: 3}`:  false, // neither: fails
			`spec: {runAsUser: true, priority: 3}`:   false,
			`spec: {runAsUser: 1.5, priority: 3}`:    true,
			`spec: {priority: 3}`:                    true,
			`spec: {runAsUser: 1, priority: 10}`:     false,
			`spec: {runAsUser: 1, priority: "100m"}`: true, // 0.1
			`spec: {runAsUser: 1, priority: "1k"}`:   false,
			`spec: {runAsUser: 1}`:                   true, // missing reads 0
			`spec: {runAsUser: 1, priority: -1}`:     false,
			`spec: {runAsUser: 1, priority: null}`:   true,
		},
	}, {
		name: "condition anchor: an element whose condition fails is skipped",
		validate: `      pattern:
        spec:
          containers:
          - (name): "a*"
            image: "!*:latest"
`,
		verdicts: map[string]bool{
			`spec: {containers: [{name: app, image: "x:latest"}]}`:                               false,
			`spec: {containers: [{name: b, image: "x:latest"}]}`:                                 true, // all skipped: skip
			`spec: {containers: [{name: app, image: "x:1"}]}`:                                    true,
			`spec: {containers: [{name: b, image: "x:latest"}, {name: app, image: "x:1"}]}`:      true,
			`spec: {containers: [{name: b, image: "x:latest"}, {name: app, image: "x:latest"}]}`: false,
			`spec: {containers: [{image: "x:latest"}]}`:                                          true, // condition key missing: skip
		},
	}, {
		name: "condition anchor: a skip cuts the plain keys after it, in Kyverno's order",
		validate: `      pattern:
        spec:
          containers:
          - (name): a
          hostNetwork: false
`,
		verdicts: map[string]bool{
			`spec: {containers: [{name: b}], hostNetwork: true}`:  true, // containers skip first
			`spec: {containers: [{name: a}], hostNetwork: true}`:  false,
			`spec: {containers: [{name: a}], hostNetwork: false}`: true,
			`spec: {containers: [], hostNetwork: true}`:           false, // an empty list passes
		},
	}, {
		name: "condition anchor in anyPattern: fails when none passes and one fails",
		validate: `      anyPattern:
      - spec: {(type): NodePort, externalTrafficPolicy: Local}
      - spec: {(type): LoadBalancer, loadBalancerIP: "?*"}
`,
		verdicts: map[string]bool{
			`spec: {type: ClusterIP}`:                              true, // both skip
			`spec: {type: NodePort, externalTrafficPolicy: Local}`: true,
			`spec: {type: NodePort}`:                               false,
			`spec: {type: LoadBalancer}`:                           false,
		},
	}, {
		name: "a scalar pattern against a list checks each element",
		validate: `      pattern:
        spec:
          =(args): "!*secret*"
`,
		verdicts: map[string]bool{
			`spec: {args: [a, b]}`:         true,
			`spec: {args: [a, my-secret]}`: false,
			`spec: {args: "x"}`:            true,
		},
	}, {
		name: "key: '*' needs the key present and not null",
		validate: `      pattern:
        spec:
          serviceAccountName: "*"
`,
		verdicts: map[string]bool{
			`spec: {serviceAccountName: x}`: true,
			`spec: {}`:                      false,
		},
	}, {
		name: "anyPattern: one alternative suffices",
		validate: `      anyPattern:
      - spec: {hostNetwork: false}
      - metadata: {labels: {allow-host: "true"}}
`,
		verdicts: map[string]bool{
			`{spec: {hostNetwork: false}, metadata: {}}`:                            true,
			`{spec: {hostNetwork: true}, metadata: {labels: {allow-host: "true"}}}`: true,
			`{spec: {hostNetwork: true}, metadata: {}}`:                             false,
		},
	}, {
		name: "foreach pattern over containers and initContainers",
		validate: `      foreach:
      - list: request.object.spec.containers
        pattern: {image: "*:*"}
      - list: request.object.spec.initContainers
        pattern: {image: "*:*"}
`,
		verdicts: map[string]bool{
			`spec: {containers: [{image: "a:1"}]}`:                                 true,
			`spec: {containers: [{image: "a"}]}`:                                   false,
			`spec: {containers: [{image: "a:1"}], initContainers: [{image: "b"}]}`: false,
		},
	}, {
		name: "foreach over a value that is not a list reads it as one element",
		validate: `      foreach:
      - list: request.object.spec.securityContext
        pattern: {runAsNonRoot: true}
`,
		verdicts: map[string]bool{
			`spec: {securityContext: {runAsNonRoot: true}}`:  true,
			`spec: {securityContext: {runAsNonRoot: false}}`: false,
			`spec: {}`: true, // missing: Kyverno skips the entry
		},
	}, {
		name: "foreach pattern on elements that are not maps checks the whole resource",
		validate: `      foreach:
      - list: request.object.spec.args
        pattern: {metadata: {name: "ok-*"}}
`,
		verdicts: map[string]bool{
			`{metadata: {name: ok-1}, spec: {args: [a, b]}}`: true,
			`{metadata: {name: no}, spec: {args: [a]}}`:      false,
			`{metadata: {name: no}, spec: {args: []}}`:       true,
		},
	}, {
		name: "foreach deny on element.keys(@)",
		validate: `      foreach:
      - list: request.object.spec.containers[]
        deny:
          conditions:
            all:
            - {key: livenessProbe, operator: AllNotIn, value: "{{ element.keys(@)[] }}"}
            - {key: readinessProbe, operator: AllNotIn, value: "{{ element.keys(@)[] }}"}
`,
		verdicts: map[string]bool{
			`spec: {containers: [{name: a, livenessProbe: {}}]}`:                     true,
			`spec: {containers: [{name: a, readinessProbe: {}}, {name: b}]}`:         false,
			`spec: {containers: [{name: a, readinessProbe: {}, livenessProbe: {}}]}`: true,
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expr := convertOne(t, podPolicy(tc.validate))
			for resource, want := range tc.verdicts {
				obj, err := decodeYAML([]byte(resource))
				if err != nil {
					t.Fatal(err)
				}
				got, err := ev.eval(expr, obj)
				if err != nil {
					t.Fatalf("%s: %v", resource, err)
				}
				if got != want {
					t.Errorf("%s: pass=%v, want %v\nexpression: %s", resource, got, want, expr)
				}
			}
		})
	}
}

func TestPatternGolden(t *testing.T) {
	cases := map[string]string{
		`      pattern:
        metadata:
          labels:
            app: "?*"
`: `has(object.metadata) && type(object.metadata) == map && has(object.metadata.labels) && type(object.metadata.labels) == map && has(object.metadata.labels.app) && (type(object.metadata.labels.app) == list ? object.metadata.labels.app.all(item, ((type(item) == string && (item != '')) || (type(item) == int && (string(item) != '')) || type(item) == double || type(item) == bool)) : ((type(object.metadata.labels.app) == string && (object.metadata.labels.app != '')) || (type(object.metadata.labels.app) == int && (string(object.metadata.labels.app) != '')) || type(object.metadata.labels.app) == double || type(object.metadata.labels.app) == bool))`,
		`      pattern:
        spec:
          X(hostNetwork): "null"
`: `has(object.spec) && type(object.spec) == map && !has(object.spec.hostNetwork)`,
		`      deny: {}
`: `false`,
	}
	for validate, want := range cases {
		got := convertOne(t, podPolicy(validate))
		if got != want {
			t.Errorf("%s\n got: %s\nwant: %s", validate, got, want)
		}
	}
}

func TestWildcard(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"?*", "", false}, {"?*", "a", true}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"*:*", "a:b", true}, {"*:*", "ab", false}, {"", "", true}, {"", "a", false}, {"a*b*c", "aXbYc", true},
	} {
		if got := wildcardMatch(c.p, c.s); got != c.want {
			t.Errorf("wildcardMatch(%q, %q) = %v", c.p, c.s, got)
		}
		if got := strings.HasPrefix(wildcardRegex(c.p), "(?s)^"); !got {
			t.Errorf("wildcardRegex(%q) not anchored", c.p)
		}
	}
}
