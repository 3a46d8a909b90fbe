package work

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// A policy as a cluster holds it after a namespace admin edited it: policyhub applied spec.rules
// and the labels; someone else added an enforcement override and a label, and Kyverno wrote status.
const driftedPolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: p
  namespace: shop
  resourceVersion: "42"
  labels: {policyhub.io/managed-by: hub, sneaky: "yes"}
  managedFields:
  - manager: policyhub
    operation: Apply
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata": {"f:labels": {"f:policyhub.io/managed-by": {}}}, "f:spec": {"f:rules": {}}}
  - manager: kubectl-edit
    operation: Update
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata": {"f:labels": {"f:sneaky": {}}}, "f:spec": {"f:validationFailureActionOverrides": {}, "f:webhookConfiguration": {"f:matchConditions": {"k:{\"name\":\"never\"}": {".": {}, "f:name": {}, "f:expression": {}}}}}}
  - manager: kyverno
    operation: Update
    subresource: status
    fieldsType: FieldsV1
    fieldsV1: {"f:status": {"f:ready": {}}}
spec:
  rules: [{name: r, validate: {failureAction: Enforce}}]
  validationFailureActionOverrides: [{action: Audit, namespaces: [shop]}]
  webhookConfiguration:
    matchConditions: [{name: never, expression: "false"}]
status: {ready: true}
`

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestForeignFieldsAreDriftAndRemoved(t *testing.T) {
	live := object(t, driftedPolicy)
	desired := object(t, `{apiVersion: kyverno.io/v1, kind: Policy, metadata: {name: p, namespace: shop, labels: {policyhub.io/managed-by: hub}}, spec: {rules: [{name: r, validate: {failureAction: Enforce}}]}}`)

	paths, err := foreignPaths(live)
	if err != nil {
		t.Fatal(err)
	}
	// Status is Kyverno's; a list element's field is cut to its list.
	if got, want := fmt.Sprint(paths), "[[spec validationFailureActionOverrides] [metadata labels sneaky] [spec webhookConfiguration matchConditions]]"; got != want {
		t.Errorf("foreign paths %s, want %s", got, want)
	}
	if inSync(desired, live) {
		t.Error("a policy with fields another manager added is in sync; want drift")
	}

	patch, err := restorePatch(desired, live, paths)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]any
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(ops), "[map[op:test path:/metadata/resourceVersion value:42] map[op:remove path:/spec/validationFailureActionOverrides] map[op:remove path:/metadata/labels/sneaky] map[op:remove path:/spec/webhookConfiguration/matchConditions]]"; got != want {
		t.Errorf("patch %s,\nwant %s", got, want)
	}

	// A dry-run shows the same outcome: nothing of the admin's additions is left.
	after := withoutForeign(desired, live, paths)
	if _, found, _ := unstructured.NestedFieldNoCopy(after.Object, "spec", "validationFailureActionOverrides"); found {
		t.Error("the override survives the restore")
	}
	if after.GetLabels()["sneaky"] != "" || after.GetLabels()["policyhub.io/managed-by"] != "hub" {
		t.Errorf("labels after restore %v", after.GetLabels())
	}
}

// A field policyhub sets that another manager took over (with a changed value) is reset to
// policyhub's value as a whole; an object only policyhub and the status writer touched is in sync.
func TestForeignFieldsPolicyhubSets(t *testing.T) {
	desired := object(t, `{apiVersion: kyverno.io/v1, kind: Policy, metadata: {name: p}, spec: {rules: [{name: r, validate: {failureAction: Enforce}}]}}`)
	live := object(t, `{apiVersion: kyverno.io/v1, kind: Policy, metadata: {name: p, resourceVersion: "7"}, spec: {rules: [{name: r, validate: {failureAction: Audit}}]}}`)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:rules":{}}}`)}}})
	paths, _ := foreignPaths(live)
	patch, err := restorePatch(desired, live, paths)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"replace","path":"/spec/rules","value":[{"name":"r","validate":{"failureAction":"Enforce"}}]}]`; string(patch) != want {
		t.Errorf("patch %s, want %s", patch, want)
	}

	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:rules":{}}}`)}},
		{Manager: restoreFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:rules":{}}}`)}},
		{Manager: "kyverno", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
	})
	if paths, err := foreignPaths(live); err != nil || len(paths) != 0 {
		t.Errorf("foreign paths %v (%v), want none: the restore writer sets only what policyhub applies", paths, err)
	}
}
