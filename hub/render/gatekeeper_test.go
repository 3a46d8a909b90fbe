package render

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

const gatekeeperTemplate = `
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8srequiredlabels
spec:
  crd:
    spec:
      names:
        kind: K8sRequiredLabels
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8srequiredlabels
      violation[{"msg": "missing"}] { not input.review.object.metadata.labels.team }
`

const gatekeeperConstraint = `
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata:
  name: must-have-team
spec:
  enforcementAction: dryrun
  match:
    excludedNamespaces: [kube-system]
    kinds:
    - apiGroups: [apps]
      kinds: [Deployment]
`

// A Constraint's mode is its enforcementAction (Enforce: deny, Audit: warn; none: as written),
// and it never matches the hub's namespace; a template ships as written whatever the mode.
func TestGatekeeperMode(t *testing.T) {
	audit, enforce := policyhubv1.ModeAudit, policyhubv1.ModeEnforce
	for _, tc := range []struct {
		name   string
		mode   *policyhubv1.Mode
		action string
	}{
		{"no mode: as written", nil, "dryrun"},
		{"Enforce: deny", &enforce, "deny"},
		{"Audit: warn", &audit, "warn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := fleetPolicy(t, "must-have-team", gatekeeperConstraint)
			fp.Spec.Mode = tc.mode
			got, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a", Mode: tc.mode}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			objs := got.Objects["a"]
			if len(objs) != 1 {
				t.Fatalf("cluster a gets %v, want the constraint alone", names(objs))
			}
			if action, _, _ := unstructured.NestedString(objs[0].Object, "spec", "enforcementAction"); action != tc.action {
				t.Errorf("enforcementAction %q, want %q", action, tc.action)
			}
			excluded, _, _ := unstructured.NestedStringSlice(objs[0].Object, "spec", "match", "excludedNamespaces")
			if want := []string{"kube-system", policyhubv1.SyncLeaseNamespace}; !reflect.DeepEqual(excluded, want) {
				t.Errorf("excludedNamespaces %v, want %v", excluded, want)
			}

			tp := fleetPolicy(t, "k8srequiredlabels", gatekeeperTemplate)
			tp.Spec.Mode = tc.mode
			got, err = FleetPolicyTargets("hub-a", tp, []placement.Target{{Cluster: "a", Mode: tc.mode}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			spec, _, _ := unstructured.NestedMap(got.Objects["a"][0].Object, "spec")
			if _, found := spec["enforcementAction"]; found || len(spec) != 2 {
				t.Errorf("the template's spec changed: %v", spec)
			}
		})
	}
}

// A Constraint that matches everything still leaves the hub's namespace alone; rendering twice
// adds it once.
func TestGatekeeperConstraintExemptsTheHub(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policyhubv1.GatekeeperConstraintAPIVersion, "kind": "K8sRequiredLabels",
		"metadata": map[string]any{"name": "a"}, "spec": map[string]any{},
	}}
	for range 2 {
		if err := ExemptHub(obj); err != nil {
			t.Fatal(err)
		}
	}
	excluded, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "match", "excludedNamespaces")
	if !reflect.DeepEqual(excluded, []string{policyhubv1.SyncLeaseNamespace}) {
		t.Errorf("excludedNamespaces %v", excluded)
	}
	obj.Object["spec"] = map[string]any{"match": map[string]any{"excludedNamespaces": "kube-system"}}
	if err := ExemptHub(obj); err == nil {
		t.Error("a malformed excludedNamespaces was accepted")
	}
}

// A rollout's waves give each cluster its mode: a Constraint warns in the Audit wave's clusters
// and denies in the Enforce wave's, as a Kyverno policy's failure actions do.
func TestGatekeeperConstraintInRolloutWaves(t *testing.T) {
	fp := fleetPolicy(t, "must-have-team", gatekeeperConstraint)
	versions := map[string]Version{"a": {Mode: policyhubv1.ModeAudit}, "b": {Mode: policyhubv1.ModeEnforce}}
	got, err := FleetPolicyTargets("hub-a", fp, []placement.Target{{Cluster: "a"}, {Cluster: "b"}, {Cluster: "c"}}, versions)
	if err != nil {
		t.Fatal(err)
	}
	for cluster, want := range map[string]string{"a": "warn", "b": "deny"} {
		if action, _, _ := unstructured.NestedString(got.Objects[cluster][0].Object, "spec", "enforcementAction"); action != want {
			t.Errorf("cluster %s: enforcementAction %q, want %q", cluster, action, want)
		}
	}
	if len(got.Held) != 1 || got.Held[0] != "c" {
		t.Errorf("held %v, want c (no wave yet)", got.Held)
	}
}
