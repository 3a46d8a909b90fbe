package render

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func exceptionFixture() *policyhubv1.FleetPolicyException {
	ex := &policyhubv1.FleetPolicyException{}
	ex.Namespace, ex.Name = "team-a", "vendor-chart"
	ex.Spec = policyhubv1.FleetPolicyExceptionSpec{
		Target:    policyhubv1.ExceptionTarget{Kind: policyhubv1.KindFleetPolicy, Name: "disallow-latest"},
		Resources: policyhubv1.ExceptionResources{Namespaces: []string{"vendor"}, Kinds: []string{"apps/v1/Deployment"}, Names: []string{"agent-*"}},
		Clusters:  policyhubv1.ExceptionClusters{Names: []string{"cluster-1"}},
		Owner:     "team-a", Reason: "vendor chart pins latest", Ticket: "OPS-1",
		ExpiresAt:   metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		RequestedBy: "bob",
	}
	ex.Status.Approval = &policyhubv1.ExceptionApproval{Decision: policyhubv1.DecisionApproved, By: "alice", Generation: 1}
	return ex
}

func TestExceptionRendersKyvernoKinds(t *testing.T) {
	cases := []struct {
		name    string
		policy  ExceptedPolicy
		edit    func(*policyhubv1.FleetPolicyException)
		want    []string // JSON fragments of the rendered object
		wantErr string
	}{
		{
			name:   "ClusterPolicy, every rule",
			policy: ExceptedPolicy{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "disallow-latest"},
			want: []string{`"apiVersion":"kyverno.io/v2"`, `"policyName":"disallow-latest","ruleNames":["*"]`,
				`"resources":{"kinds":["apps/v1/Deployment"],"names":["agent-*"],"namespaces":["vendor"]}`, `"background":true`,
				`"policyhub.io/exception-approved-by":"alice"`, `"policyhub.io/exception-expires-at":"2026-12-01T00:00:00Z"`,
				`"policyhub.io/source":"FleetPolicyException/team-a/vendor-chart"`, `"namespace":"policyhub-system"`},
		},
		{
			name:   "namespaced Policy, named rules with Kyverno's generated ones",
			policy: ExceptedPolicy{APIVersion: "kyverno.io/v1", Kind: "Policy", Namespace: "shop", Name: "limits"},
			edit:   func(ex *policyhubv1.FleetPolicyException) { ex.Spec.Target.Rules = []string{"check-image"} },
			want:   []string{`"policyName":"shop/limits","ruleNames":["check-image","autogen-check-image","autogen-cronjob-check-image"]`},
		},
		{
			name:   "ValidatingPolicy: CEL conditions, expiresAt and properties",
			policy: ExceptedPolicy{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy", Name: "no-latest"},
			edit: func(ex *policyhubv1.FleetPolicyException) {
				ex.Spec.Resources.Selector = &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"tier": "edge"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist}}}
			},
			want: []string{`"apiVersion":"policies.kyverno.io/v1"`, `"policyRefs":[{"kind":"ValidatingPolicy","name":"no-latest"}]`,
				`"expiresAt":"2026-12-01T00:00:00Z"`, `"reportResult":"skip"`, `"approved-by":"alice"`, `"ticket":"OPS-1"`,
				`"expression":"has(object.metadata.namespace) \u0026\u0026 (object.metadata.namespace in ['vendor'])"`,
				`"expression":"object.kind in ['Deployment']"`,
				`"expression":"object.metadata.name.matches('^agent-.*$')"`,
				`(has(object.metadata.labels) \u0026\u0026 'tier' in object.metadata.labels) \u0026\u0026 object.metadata.labels['tier'] == 'edge' \u0026\u0026 !(has(object.metadata.labels) \u0026\u0026 'legacy' in object.metadata.labels)`},
		},
		{
			name:   "ValidatingPolicy: the exception's own CEL conditions after the hub's",
			policy: ExceptedPolicy{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy", Name: "no-latest"},
			edit: func(ex *policyhubv1.FleetPolicyException) {
				ex.Spec.Resources.MatchConditions = []policyhubv1.ExceptionMatchCondition{{Name: "edge-only", Expression: "object.metadata.labels['tier'] == 'edge'"}}
			},
			want: []string{`{"expression":"object.metadata.name.matches('^agent-.*$')","name":"policyhub-names"},{"expression":"object.metadata.labels['tier'] == 'edge'","name":"edge-only"}`},
		},
		{
			name:   "CEL conditions for a kyverno.io policy are refused",
			policy: ExceptedPolicy{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "p"},
			edit: func(ex *policyhubv1.FleetPolicyException) {
				ex.Spec.Resources.MatchConditions = []policyhubv1.ExceptionMatchCondition{{Name: "c", Expression: "true"}}
			},
			wantErr: "spec.resources.matchConditions: ClusterPolicy/p is a kyverno.io policy",
		},
		{
			name:    "rules on a CEL policy are refused",
			policy:  ExceptedPolicy{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy", Name: "no-latest"},
			edit:    func(ex *policyhubv1.FleetPolicyException) { ex.Spec.Target.Rules = []string{"r"} },
			wantErr: "spec.target.rules",
		},
		{
			name:    "an exception cannot exempt from an exception",
			policy:  ExceptedPolicy{APIVersion: "kyverno.io/v2", Kind: "PolicyException", Namespace: "x", Name: "y"},
			wantErr: "is not a Kyverno policy an exception can exempt from",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex := exceptionFixture()
			if tc.edit != nil {
				tc.edit(ex)
			}
			targets, err := ExceptionTargets("hub-1", ex, tc.policy, defaultNamespace, []string{"cluster-1", "cluster-2"})
			if tc.wantErr != "" {
				if _, ok := AsInvalid(err); !ok || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want an InvalidError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := targets.Clusters(); len(got) != 2 {
				t.Fatalf("clusters = %v", got)
			}
			obj := targets.Objects["cluster-1"][0]
			if obj.GetName() != policyhubv1.ExceptionObjectName("team-a", "vendor-chart") || len(obj.GetName()) > 63 {
				t.Errorf("name = %q", obj.GetName())
			}
			data, _ := json.Marshal(obj.Object)
			for _, w := range tc.want {
				if !strings.Contains(string(data), w) {
					t.Errorf("rendered %s\nlacks %s", data, w)
				}
			}
		})
	}
}

func TestExceptionTargetsEmptyForNoCluster(t *testing.T) {
	targets, err := ExceptionTargets("hub-1", exceptionFixture(), ExceptedPolicy{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "p"}, defaultNamespace, nil)
	if err != nil || len(targets.Objects) != 0 {
		t.Fatalf("targets = %v, %v; want none", targets.Objects, err)
	}
}

func TestExceptionTargetsPerClusterNamespace(t *testing.T) {
	namespaceOf := func(c string) string {
		if c == "legacy" {
			return "kyverno-exceptions"
		}
		return policyhubv1.DefaultExceptionNamespace
	}
	targets, err := ExceptionTargets("hub-1", exceptionFixture(), ExceptedPolicy{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "p"}, namespaceOf, []string{"a", "b", "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	if got := targets.Objects["legacy"][0].GetNamespace(); got != "kyverno-exceptions" {
		t.Errorf("legacy's exception is in %q", got)
	}
	if a, b := targets.Objects["a"], targets.Objects["b"]; a[0].GetNamespace() != policyhubv1.DefaultExceptionNamespace || &a[0] != &b[0] {
		t.Errorf("a and b do not share one rendering in %s", policyhubv1.DefaultExceptionNamespace)
	}
}

func defaultNamespace(string) string { return policyhubv1.DefaultExceptionNamespace }
