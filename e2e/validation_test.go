package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const validFleetPolicy = `
apiVersion: policyhub.io/v1alpha1
kind: FleetPolicy
metadata:
  name: disallow-latest-tag
spec:
  mode: Enforce
  placement:
    clusterSelector:
      matchLabels:
        env: prod
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    metadata:
      annotations:
        policies.kyverno.io/severity: medium
    spec:
      rules:
      - name: require-pinned-image
        match:
          any:
          - resources:
              kinds: [Deployment]
        validate:
          message: pin the image
          pattern:
            spec:
              template:
                spec:
                  containers:
                  - image: "!*:latest"
`

const validApplicationPolicy = `
apiVersion: policyhub.io/v1alpha1
kind: ApplicationPolicy
metadata:
  name: shop-limits
  namespace: default
spec:
  application: shop
  mode: Audit
  scope:
    kinds: [Deployment]
  rules:
  - name: require-limits
    validate:
      message: set memory limits
      pattern:
        spec:
          template:
            spec:
              containers:
              - resources:
                  limits:
                    memory: "?*"
`

const validPolicySet = `
apiVersion: policyhub.io/v1alpha1
kind: PolicySet
metadata:
  name: pss-baseline
spec:
  source:
    oci:
      ref: registry.example.com/policies/pss-baseline:v1
      secretRef: {name: registry}
      interval: 10m
  select:
    excludeKinds: [Policy]
  placement:
    clusterSelector:
      matchLabels: {env: prod}
  mode: Enforce
`

const validPolicyReportSummary = `
apiVersion: policyhub.io/v1alpha1
kind: PolicyReportSummary
metadata:
  name: summary
  namespace: default
spec:
  cluster: cluster-1
  generatedAt: "2026-01-02T03:04:05Z"
  heartbeatInterval: 1m0s
  totals:
    pass: 3
    fail: 1
  policies:
  - name: require-labels
    kind: ClusterPolicy
    severity: high
    results: {pass: 3, fail: 1}
  applications:
  - namespace: shop
    name: shop
    policy: require-labels
    results: {fail: 1}
`

// The hub apiserver refuses invalid declarations at admission with a message a user understands,
// and admits the valid ones they were made from (so each refusal is the rule's doing).
func TestAdmissionRefusesInvalidDeclarations(t *testing.T) {
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)

	set := func(value any, path ...string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(path ...string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, path...) }
	}

	// rollout replaces spec.mode (a rollout decides it) by a rollout of these waves.
	rollout := func(waves ...any) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "mode")
			set(map[string]any{"waves": waves}, "spec", "rollout")(u)
		}
	}
	wave := func(name string, clusters ...any) map[string]any {
		w := map[string]any{"name": name}
		if len(clusters) > 0 {
			w["clusters"] = clusters
		}
		return w
	}

	// doesNotExist is a cluster selector of one DoesNotExist requirement: it requires no label.
	doesNotExist := func(key string) map[string]any {
		return map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "DoesNotExist"}}}
	}

	tests := []struct {
		name   string
		base   string
		change func(*unstructured.Unstructured)
		want   []string // substrings of the refusal; none means the object must be admitted
	}{
		{name: "valid FleetPolicy", base: validFleetPolicy},
		{name: "valid ApplicationPolicy", base: validApplicationPolicy},
		{name: "valid PolicyReportSummary", base: validPolicyReportSummary},
		{
			name: "FleetPolicy template without apiVersion", base: validFleetPolicy,
			change: remove("spec", "template", "apiVersion"),
			want:   []string{"spec.template", "template.apiVersion is required"},
		},
		{
			name: "FleetPolicy template without kind", base: validFleetPolicy,
			change: remove("spec", "template", "kind"),
			want:   []string{"template.kind is required"},
		},
		{
			name: "FleetPolicy template without spec", base: validFleetPolicy,
			change: remove("spec", "template", "spec"),
			want:   []string{"template.spec is required"},
		},
		{
			name: "FleetPolicy template that is not a Kyverno policy", base: validFleetPolicy,
			change: set("apps/v1", "spec", "template", "apiVersion"),
			want:   []string{"template must be a Kyverno policy, a Kubernetes ValidatingAdmissionPolicy or a Gatekeeper ConstraintTemplate or Constraint: the group of its apiVersion must be kyverno.io, policies.kyverno.io or admissionregistration.k8s.io, or it is templates.gatekeeper.sh/v1 or constraints.gatekeeper.sh/v1beta1"},
		},
		{
			name: "FleetPolicy template in a look-alike group", base: validFleetPolicy,
			change: set("evil-kyverno.io/v1", "spec", "template", "apiVersion"),
			want:   []string{"template must be a Kyverno policy"},
		},
		{
			name: "FleetPolicy mode other than Audit/Enforce", base: validFleetPolicy,
			change: set("Block", "spec", "mode"),
			want:   []string{"spec.mode", `Unsupported value: "Block"`, `"Audit"`, `"Enforce"`},
		},
		{
			name: "FleetPolicy cluster override with a bad mode", base: validFleetPolicy,
			change: set([]any{map[string]any{"clusters": []any{"cluster-1"}, "mode": "enforce"}}, "spec", "clusterOverrides"),
			want:   []string{"spec.clusterOverrides[0].mode", `Unsupported value: "enforce"`},
		},
		{
			name: "FleetPolicy cluster override that selects nothing", base: validFleetPolicy,
			change: set([]any{map[string]any{"dryRun": true}}, "spec", "clusterOverrides"),
			want:   []string{"a cluster override must select clusters"},
		},
		{
			name: "FleetPolicy empty cluster selector", base: validFleetPolicy,
			change: set(map[string]any{}, "spec", "placement", "clusterSelector"),
			want:   []string{"placement.clusterSelector is empty and would select every cluster"},
		},
		{
			name: "FleetPolicy cluster selector of DoesNotExist alone", base: validFleetPolicy,
			change: set(doesNotExist("decommissioned"), "spec", "placement", "clusterSelector"),
			want:   []string{"spec.placement.clusterSelector", "placement.clusterSelector has only NotIn or DoesNotExist requirements and would select every cluster without those labels"},
		},
		{
			name: "FleetPolicy cluster selector of NotIn and DoesNotExist", base: validFleetPolicy,
			change: set(map[string]any{"matchExpressions": []any{
				map[string]any{"key": "env", "operator": "NotIn", "values": []any{"dev"}},
				map[string]any{"key": "decommissioned", "operator": "DoesNotExist"},
			}}, "spec", "placement", "clusterSelector"),
			want: []string{"placement.clusterSelector has only NotIn or DoesNotExist requirements"},
		},
		{
			name: "valid FleetPolicy cluster selector of DoesNotExist with In", base: validFleetPolicy,
			change: set(map[string]any{"matchExpressions": []any{
				map[string]any{"key": "env", "operator": "In", "values": []any{"prod"}},
				map[string]any{"key": "decommissioned", "operator": "DoesNotExist"},
			}}, "spec", "placement", "clusterSelector"),
		},
		{
			name: "FleetPolicy cluster selector with too many expressions", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				var exprs []any
				for range 33 {
					exprs = append(exprs, map[string]any{"key": "env", "operator": "Exists"})
				}
				set(map[string]any{"matchExpressions": exprs}, "spec", "placement", "clusterSelector")(u)
			},
			want: []string{"spec.placement.clusterSelector.matchExpressions", "must have at most 32 items"},
		},
		{
			name: "FleetPolicy cluster override with an empty selector", base: validFleetPolicy,
			change: set([]any{map[string]any{"clusterSelector": map[string]any{}, "dryRun": true}}, "spec", "clusterOverrides"),
			want:   []string{"spec.clusterOverrides[0].clusterSelector", "clusterOverrides[].clusterSelector is empty and would select every cluster"},
		},
		{
			name: "FleetPolicy cluster override selecting by DoesNotExist alone", base: validFleetPolicy,
			change: set([]any{map[string]any{"clusterSelector": doesNotExist("canary"), "exclude": true}}, "spec", "clusterOverrides"),
			want:   []string{"spec.clusterOverrides[0].clusterSelector", "clusterOverrides[].clusterSelector has only NotIn or DoesNotExist requirements"},
		},
		{
			name: "ApplicationPolicy cluster selector of DoesNotExist alone", base: validApplicationPolicy,
			change: set(map[string]any{"clusterSelector": doesNotExist("decommissioned")}, "spec", "placement"),
			want:   []string{"spec.placement.clusterSelector", "placement.clusterSelector has only NotIn or DoesNotExist requirements"},
		},
		{
			name: "FleetPolicy placementRef without namespace", base: validFleetPolicy,
			change: set(map[string]any{"name": "prod"}, "spec", "placement", "placementRef"),
			want:   []string{"placement.placementRef.namespace is required on a FleetPolicy"},
		},
		{
			name: "valid FleetPolicy rollout, a last wave taking the rest", base: validFleetPolicy,
			change: rollout(wave("staging", "cluster-1"), map[string]any{"name": "prod", "gate": map[string]any{"maxFail": int64(2), "soak": "10m", "approval": true}}),
		},
		{
			name: "FleetPolicy rollout with spec.mode", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				rollout(wave("staging", "cluster-1"))(u)
				set("Enforce", "spec", "mode")(u)
			},
			want: []string{"spec.mode cannot be set with spec.rollout"},
		},
		{
			name: "FleetPolicy rollout with a cluster override's mode", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				rollout(wave("staging", "cluster-1"))(u)
				set([]any{map[string]any{"clusters": []any{"cluster-1"}, "mode": "Audit"}}, "spec", "clusterOverrides")(u)
			},
			want: []string{"spec.clusterOverrides[].mode cannot be set with spec.rollout"},
		},
		{
			name: "FleetPolicy rollout with two waves of one name", base: validFleetPolicy,
			change: rollout(wave("staging", "cluster-1"), wave("staging", "cluster-2")),
			want:   []string{"rollout.waves[].name must be unique"},
		},
		{
			name: "FleetPolicy rollout whose first wave selects nothing", base: validFleetPolicy,
			change: rollout(wave("rest"), wave("prod", "cluster-2")),
			want:   []string{"only the last rollout wave may select no clusters"},
		},
		{
			name: "FleetPolicy rollout wave with an empty selector", base: validFleetPolicy,
			change: rollout(map[string]any{"name": "staging", "clusterSelector": map[string]any{}}, wave("prod")),
			want:   []string{"spec.rollout.waves[0].clusterSelector", "rollout.waves[].clusterSelector is empty"},
		},
		{
			name: "FleetPolicy last rollout wave with an empty selector", base: validFleetPolicy,
			change: rollout(wave("staging", "cluster-1"), map[string]any{"name": "prod", "clusterSelector": map[string]any{}}),
			want:   []string{"spec.rollout.waves[1].clusterSelector", "leave clusterSelector out of the last wave"},
		},
		{
			name: "FleetPolicy rollout wave selecting by DoesNotExist alone", base: validFleetPolicy,
			change: rollout(map[string]any{"name": "staging", "clusterSelector": doesNotExist("canary")}, wave("prod")),
			want:   []string{"spec.rollout.waves[0].clusterSelector", "rollout.waves[].clusterSelector has only NotIn or DoesNotExist requirements"},
		},
		{
			name: "FleetPolicy rollout without waves", base: validFleetPolicy,
			change: rollout(),
			want:   []string{"spec.rollout.waves"},
		},
		{
			name: "FleetPolicy rollout wave with a bad name", base: validFleetPolicy,
			change: rollout(wave("Prod_1", "cluster-1")),
			want:   []string{"spec.rollout.waves[0].name"},
		},
		{
			name: "FleetPolicy rollout gate with a negative maxFail", base: validFleetPolicy,
			change: rollout(map[string]any{"name": "w", "clusters": []any{"cluster-1"}, "gate": map[string]any{"maxFail": int64(-1)}}),
			want:   []string{"spec.rollout.waves[0].gate.maxFail"},
		},
		{
			name: "FleetPolicy namespaced Kyverno kind without namespace", base: validFleetPolicy,
			change: set("Policy", "spec", "template", "kind"),
			want:   []string{"template.metadata.namespace is required for a namespaced Kyverno kind"},
		},
		{
			name: "ApplicationPolicy without application", base: validApplicationPolicy,
			change: remove("spec", "application"),
			want:   []string{"spec.application is required"},
		},
		{
			name: "ApplicationPolicy without rules or validations", base: validApplicationPolicy,
			change: remove("spec", "rules"),
			want:   []string{"give spec.rules (Kyverno rules) or spec.validations (CEL validations): a policy needs at least one"},
		},
		{
			name: "ApplicationPolicy with both rules and validations", base: validApplicationPolicy,
			change: set([]any{map[string]any{"expression": "object.spec.replicas <= 5"}}, "spec", "validations"),
			want:   []string{"give spec.rules or spec.validations, not both"},
		},
		{
			name: "ApplicationPolicy scope with neither kinds nor resources", base: validApplicationPolicy,
			change: set(map[string]any{}, "spec", "scope"),
			want:   []string{"scope needs kinds or resources (or both)"},
		},
		{
			name: "ApplicationPolicy without scope", base: validApplicationPolicy,
			change: remove("spec", "scope"),
			want:   []string{"spec.scope is required"},
		},
		{
			name: "ApplicationPolicy mode other than Audit/Enforce", base: validApplicationPolicy,
			change: set("Warn", "spec", "mode"),
			want:   []string{"spec.mode", `Unsupported value: "Warn"`},
		},
		{
			name: "PolicyReportSummary with empty spec.cluster", base: validPolicyReportSummary,
			change: set("", "spec", "cluster"),
			want:   []string{"spec.cluster is required: the name of the managed cluster this summary describes"},
		},
		{
			name: "PolicyReportSummary without spec.cluster", base: validPolicyReportSummary,
			change: remove("spec", "cluster"),
			want:   []string{"spec.cluster is required"},
		},
		// An agent speaks only for its cluster: nothing it writes may reach another cluster's
		// results, the rollout gates or the hub's metrics.
		{
			name: "PolicyReportSummary under another name than summary", base: validPolicyReportSummary,
			change: set("cluster-1", "metadata", "name"),
			want:   []string{"metadata.name must be summary"},
		},
		{
			name: "PolicyReportSummary with a negative count", base: validPolicyReportSummary,
			change: set(int64(-1000), "spec", "totals", "fail"),
			want:   []string{"spec.totals.fail", "greater than or equal to 0"},
		},
		{
			name: "PolicyReportSummary with negative blocked admissions of a policy", base: validPolicyReportSummary,
			change: set([]any{map[string]any{"name": "p", "blocked": int64(-1), "results": map[string]any{}}}, "spec", "policies"),
			want:   []string{"spec.policies[0].blocked", "greater than or equal to 0"},
		},
		{
			name: "valid PolicyReportSummary, a policy with and without its kind", base: validPolicyReportSummary,
			change: set([]any{
				map[string]any{"name": "p", "results": map[string]any{"fail": int64(1)}},
				map[string]any{"name": "p", "kind": "ClusterPolicy", "results": map[string]any{"fail": int64(2)}},
			}, "spec", "policies"),
		},
		{
			name: "PolicyReportSummary listing a policy twice", base: validPolicyReportSummary,
			change: set([]any{
				map[string]any{"name": "p", "kind": "ClusterPolicy", "results": map[string]any{"fail": int64(1)}},
				map[string]any{"name": "p", "kind": "ClusterPolicy", "results": map[string]any{"fail": int64(1)}},
			}, "spec", "policies"),
			want: []string{"spec.policies[1]", "Duplicate value"},
		},
		{
			name: "PolicyReportSummary listing a kindless policy twice", base: validPolicyReportSummary,
			change: set([]any{
				map[string]any{"name": "p", "results": map[string]any{}},
				map[string]any{"name": "p", "namespace": "", "results": map[string]any{}},
			}, "spec", "policies"),
			want: []string{"spec.policies[1]", "Duplicate value"},
		},
		{
			name: "PolicyReportSummary listing an application twice", base: validPolicyReportSummary,
			change: set([]any{
				map[string]any{"namespace": "shop", "name": "shop", "policy": "p", "results": map[string]any{}},
				map[string]any{"namespace": "shop", "name": "shop", "policy": "p", "results": map[string]any{"fail": int64(3)}},
			}, "spec", "applications"),
			want: []string{"spec.applications[1]", "Duplicate value"},
		},
		{
			name: "PolicyReportSummary with an overlong severity", base: validPolicyReportSummary,
			change: set([]any{map[string]any{"name": "p", "severity": strings.Repeat("x", 65), "results": map[string]any{}}}, "spec", "policies"),
			want:   []string{"spec.policies[0].severity", "Too long"},
		},
		{
			// The apiserver's date-time format allows it; Go's cannot read it, and one such
			// value would make the hub's whole list of summaries undecodable.
			name: "PolicyReportSummary with a lowercase date-time", base: validPolicyReportSummary,
			change: set("2026-01-02t03:04:05z", "spec", "generatedAt"),
			want:   []string{"spec.generatedAt"},
		},
		{
			name: "PolicyReportSummary with a heartbeat Go cannot parse", base: validPolicyReportSummary,
			change: set("forever", "spec", "heartbeatInterval"),
			want:   []string{"spec.heartbeatInterval"},
		},
		{
			name: "valid FleetPolicy of a ValidatingAdmissionPolicy", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				set("admissionregistration.k8s.io/v1", "spec", "template", "apiVersion")(u)
				set("ValidatingAdmissionPolicy", "spec", "template", "kind")(u)
				set(map[string]any{"validations": []any{map[string]any{"expression": "true"}}}, "spec", "template", "spec")(u)
			},
		},
		{
			name: "FleetPolicy of a ValidatingAdmissionPolicyBinding", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				set("admissionregistration.k8s.io/v1", "spec", "template", "apiVersion")(u)
				set("ValidatingAdmissionPolicyBinding", "spec", "template", "kind")(u)
			},
			want: []string{"template.kind: not a policy kind policyhub ships", "ValidatingAdmissionPolicy, MutatingAdmissionPolicy, whose bindings policyhub writes"},
		},
		{
			name: "valid FleetPolicy of a Gatekeeper Constraint", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				set("constraints.gatekeeper.sh/v1beta1", "spec", "template", "apiVersion")(u)
				set("K8sRequiredLabels", "spec", "template", "kind")(u)
				set(map[string]any{"parameters": map[string]any{"labels": []any{"team"}}}, "spec", "template", "spec")(u)
			},
		},
		{
			name: "FleetPolicy of a Gatekeeper mutation", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				set("mutations.gatekeeper.sh/v1", "spec", "template", "apiVersion")(u)
				set("Assign", "spec", "template", "kind")(u)
			},
			want: []string{"template must be a Kyverno policy", "mutations.gatekeeper.sh is never shipped"},
		},
		{
			name: "FleetPolicy of a Gatekeeper template in a namespace", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				set("templates.gatekeeper.sh/v1", "spec", "template", "apiVersion")(u)
				set("ConstraintTemplate", "spec", "template", "kind")(u)
				set("shop", "spec", "template", "metadata", "namespace")(u)
			},
			want: []string{"Gatekeeper's ConstraintTemplates and Constraints are cluster-scoped"},
		},
		{
			name: "FleetPolicy template taking a shadow's name", base: validFleetPolicy,
			change: set("policyhub-shadow-disallow-latest-tag", "spec", "template", "metadata", "name"),
			want:   []string{"template.metadata.name may not start with policyhub-shadow-"},
		},
		{
			name: "valid FleetPolicy created previewed (spec.preview without a template)", base: validFleetPolicy,
			change: set(map[string]any{}, "spec", "preview"),
		},
		{
			name: "FleetPolicy preview candidate taking a shadow's name", base: validFleetPolicy,
			change: set(map[string]any{"template": map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
				"metadata": map[string]any{"name": "policyhub-shadow-x"}, "spec": map[string]any{}}}, "spec", "preview"),
			want: []string{"spec.preview.template", "may not start with policyhub-shadow-"},
		},
		{
			name: "FleetPolicy preview with a rollout's preview gate", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				rollout(wave("staging", "cluster-1"))(u)
				set(map[string]any{"maxWouldFail": int64(0)}, "spec", "rollout", "previewGate")(u)
				set(map[string]any{}, "spec", "preview")(u)
			},
			want: []string{"spec.preview cannot be set with spec.rollout.previewGate"},
		},
		{
			name: "valid FleetPolicy rollout with a parity gate", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				rollout(wave("staging", "cluster-1"))(u)
				set(map[string]any{"parity": map[string]any{"maxDiffering": int64(0)}}, "spec", "rollout", "previewGate")(u)
			},
		},
		{
			name: "FleetPolicy rollout with an empty preview gate", base: validFleetPolicy,
			change: func(u *unstructured.Unstructured) {
				rollout(wave("staging", "cluster-1"))(u)
				set(map[string]any{}, "spec", "rollout", "previewGate")(u)
			},
			want: []string{"rollout.previewGate needs maxWouldFail, maxNewlyFailing or parity"},
		},
		{
			name: "PolicySet rollout with a preview gate", base: validPolicySet,
			change: set(map[string]any{"waves": []any{map[string]any{"name": "all"}}, "previewGate": map[string]any{"maxWouldFail": int64(0)}}, "spec", "rollout"),
			want:   []string{"spec.rollout.previewGate is not supported on a PolicySet yet"},
		},
		{name: "valid PolicySet from OCI", base: validPolicySet},
		{
			name: "valid PolicySet inline", base: validPolicySet,
			change: func(u *unstructured.Unstructured) {
				set(map[string]any{"inline": []any{map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{}}}}, "spec", "source")(u)
			},
		},
		{
			name: "PolicySet with two sources", base: validPolicySet,
			change: set(map[string]any{}, "spec", "source", "configMaps"),
			want:   []string{"spec.source needs exactly one of oci, fluxSource, configMaps, inline"},
		},
		{
			name: "PolicySet without a source", base: validPolicySet,
			change: set(map[string]any{}, "spec", "source"),
			want:   []string{"spec.source needs exactly one of oci, fluxSource, configMaps, inline"},
		},
		{
			name: "PolicySet OCI reference with a scheme", base: validPolicySet,
			change: set("oci://registry.example.com/policies/pss:v1", "spec", "source", "oci", "ref"),
			want:   []string{"spec.source.oci.ref is an OCI reference", "not a URL"},
		},
		{
			name: "PolicySet OCI digest that is not sha256", base: validPolicySet,
			change: set("registry.example.com/policies/pss@sha256:abc", "spec", "source", "oci", "ref"),
			want:   []string{"spec.source.oci.ref: a digest must be @sha256: and 64 lowercase hex digits"},
		},
		{
			name: "PolicySet polling every 10s", base: validPolicySet,
			change: set("10s", "spec", "source", "oci", "interval"),
			want:   []string{"spec.source.oci.interval must be at least 30s"},
		},
		{
			name: "PolicySet inline member that is not a Kyverno policy", base: validPolicySet,
			change: func(u *unstructured.Unstructured) {
				set(map[string]any{"inline": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{}}}}, "spec", "source")(u)
			},
			want: []string{"spec.source.inline[0]", "template must be a Kyverno policy"},
		},
		{
			name: "PolicySet placementRef without a namespace", base: validPolicySet,
			change: set(map[string]any{"placementRef": map[string]any{"name": "prod"}}, "spec", "placement"),
			want:   []string{"placement.placementRef.namespace is required on a PolicySet"},
		},
		{
			name: "PolicySet selecting more than 500 names", base: validPolicySet,
			change: set(func() []any {
				var names []any
				for i := range 501 {
					names = append(names, fmt.Sprint("p", i))
				}
				return names
			}(), "spec", "select", "includeNames"),
			want: []string{"spec.select.includeNames", "must have at most 500 items"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := object(t, tt.base)
			if tt.change != nil {
				tt.change(obj)
			}
			// Dry-run: admission and validation run in full, nothing is stored.
			err := hub.Create(ctx, obj, client.DryRunAll)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("a valid %s was refused: %v", obj.GetKind(), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted, want a refusal saying %q", tt.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("refused with %v, want an Invalid error", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q lacks %q", err.Error(), want)
				}
			}
		})
	}
}

// A FleetPolicy already stored may not get spec.preview without a template: that would hold its
// live policy back (withdraw it from every cluster). A candidate in spec.preview.template is
// admitted, and so is keeping a preview it was created with.
func TestAdmissionRefusesHoldingBackAPolicyInForce(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	fp := object(t, strings.Replace(validFleetPolicy, "name: disallow-latest-tag", "name: admission-hold-back", 1))
	unstructured.RemoveNestedField(fp.Object, "spec", "placement") // no cluster: nothing is dispatched
	if err := hub.Create(ctx, fp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), fp) })

	held := fp.DeepCopy()
	if err := unstructured.SetNestedField(held.Object, map[string]any{}, "spec", "preview"); err != nil {
		t.Fatal(err)
	}
	err := hub.Update(ctx, held, client.DryRunAll)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may only be set when the FleetPolicy is created") {
		t.Errorf("adding spec.preview without a template to a stored FleetPolicy: %v, want refused", err)
	}
	candidate := fp.DeepCopy()
	tmpl, _, _ := unstructured.NestedMap(fp.Object, "spec", "template")
	if err := unstructured.SetNestedMap(candidate.Object, map[string]any{"template": tmpl}, "spec", "preview"); err != nil {
		t.Fatal(err)
	}
	if err := hub.Update(ctx, candidate, client.DryRunAll); err != nil {
		t.Errorf("adding a candidate in spec.preview.template: %v, want admitted", err)
	}
}
