package v1alpha1

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// CheckAllowed never panics on any JSON a library could hold, and what it lets through holds
// by a judge of its own: a policy kind of Kyverno's two groups, never an exception, never in the
// hub's namespace, and every kind or rule type beyond validating allowed.
func FuzzCheckAllowed(f *testing.F) {
	f.Add(`{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"p"},"spec":{"rules":[{"name":"a","validate":{}}]}}`, uint8(0))
	f.Add(`{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"p"},"spec":{"rules":[{"name":"a","mutate":{}},{"name":"b","validate":{},"generate":{}}]}}`, uint8(1))
	f.Add(`{"apiVersion":"kyverno.io/v1","kind":"Policy","metadata":{"name":"p","namespace":"policyhub-system"},"spec":{"rules":[]}}`, uint8(15))
	f.Add(`{"apiVersion":"kyverno.io/v2","kind":"PolicyException","metadata":{"name":"p","namespace":"shop"},"spec":{}}`, uint8(15))
	f.Add(`{"apiVersion":"policies.kyverno.io/v1","kind":"MutatingPolicy","metadata":{"name":"p"},"spec":{}}`, uint8(1))
	f.Add(`{"apiVersion":"policies.kyverno.io/v1","kind":"ImageValidatingPolicy","metadata":{"name":"p"},"spec":{}}`, uint8(8))
	f.Add(`{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"p"},"spec":{"rules":[{"verifyImages":[]}]}}`, uint8(7))
	f.Add(`{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"p"},"spec":{"rules":{"mutate":{}}}}`, uint8(1))
	f.Add(`{"apiVersion":"templates.gatekeeper.sh/v1","kind":"ConstraintTemplate","metadata":{"name":"a"},"spec":{"crd":{"spec":{"names":{"kind":"A"}}},"targets":[{"target":"admission.k8s.gatekeeper.sh","rego":"package a"}]}}`, uint8(0))
	f.Add(`{"apiVersion":"templates.gatekeeper.sh/v1","kind":"ConstraintTemplate","metadata":{"name":"a"},"spec":{"crd":{"spec":{"names":{"kind":"A"}}},"targets":[{"target":"admission.k8s.gatekeeper.sh","libs":["http.send"]}]}}`, uint8(0))
	f.Add(`{"apiVersion":"constraints.gatekeeper.sh/v1beta1","kind":"MutatingA","metadata":{"name":"a"},"spec":{"enforcementAction":"warn"}}`, uint8(0))
	f.Add(`{"apiVersion":"constraints.gatekeeper.sh/v1beta1","kind":"A","metadata":{"name":"a"},"spec":{"enforcementAction":"scoped"}}`, uint8(0))
	all := []PolicyCapability{CapabilityMutate, CapabilityGenerate, CapabilityCleanup, CapabilityVerifyImages}
	f.Fuzz(func(t *testing.T, doc string, allowBits uint8) {
		obj := map[string]any{}
		if err := json.Unmarshal([]byte(doc), &obj); err != nil {
			return
		}
		var allow []PolicyCapability
		for i, c := range all {
			if allowBits&(1<<i) != 0 {
				allow = append(allow, c)
			}
		}
		if CheckAllowed(obj, allow) != nil {
			return
		}
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		namespace, _ := meta["namespace"].(string)
		group, _, _ := strings.Cut(apiVersion, "/")
		if group == GatekeeperTemplateGroup || group == GatekeeperConstraintGroup {
			judgeGatekeeper(t, obj, apiVersion, kind, namespace)
			return
		}
		if group != "kyverno.io" && group != "policies.kyverno.io" && group != AdmissionGroup {
			t.Fatalf("allowed a policy of group %q", group)
		}
		if strings.Contains(kind, "Exception") || kind == "GlobalContextEntry" || kind == "" {
			t.Fatalf("allowed kind %q", kind)
		}
		if namespace == SyncLeaseNamespace {
			t.Fatal("allowed a policy in the hub's namespace")
		}
		needs := func(c PolicyCapability) {
			if !slices.Contains(allow, c) {
				t.Fatalf("allowed a %s %s without %s in %v", kind, doc, c, allow)
			}
		}
		switch {
		case strings.Contains(kind, "Mutating"):
			needs(CapabilityMutate)
		case strings.Contains(kind, "Generating"):
			needs(CapabilityGenerate)
		case strings.Contains(kind, "Cleanup"), strings.Contains(kind, "Deleting"):
			needs(CapabilityCleanup)
		case strings.Contains(kind, "ImageValidating"):
			needs(CapabilityVerifyImages)
		case kind == "ClusterPolicy" || kind == "Policy":
			spec, _ := obj["spec"].(map[string]any)
			rules, _ := spec["rules"].([]any)
			for _, r := range rules {
				rule, _ := r.(map[string]any)
				for key, c := range map[string]PolicyCapability{"mutate": CapabilityMutate, "generate": CapabilityGenerate, "verifyImages": CapabilityVerifyImages} {
					if _, ok := rule[key]; ok {
						needs(c)
					}
				}
			}
		case strings.Contains(kind, "Validating"):
		default:
			t.Fatalf("allowed kind %q", kind)
		}
	})
}

// judgeGatekeeper is FuzzCheckAllowed's judge of an allowed Gatekeeper object: a v1 template or a
// v1beta1 Constraint, cluster-scoped; a template of the one target, naming no built-in that calls
// out; a Constraint with no action but deny, warn or dryrun.
func judgeGatekeeper(t *testing.T, obj map[string]any, apiVersion, kind, namespace string) {
	t.Helper()
	spec, _ := obj["spec"].(map[string]any)
	if namespace != "" {
		t.Fatalf("allowed a Gatekeeper object in namespace %q", namespace)
	}
	switch apiVersion {
	case GatekeeperTemplateAPIVersion:
		if kind != "ConstraintTemplate" {
			t.Fatalf("allowed kind %q of %s", kind, apiVersion)
		}
		targets, _ := spec["targets"].([]any)
		if len(targets) != 1 {
			t.Fatalf("allowed %d targets", len(targets))
		}
		text, _ := json.Marshal(targets)
		if gatekeeperUnsafeBuiltins.Match(text) {
			t.Fatalf("allowed a template naming an unsafe built-in: %s", text)
		}
	case GatekeeperConstraintAPIVersion:
		if action, found := spec["enforcementAction"]; found && !slices.Contains(GatekeeperActions, fmt.Sprint(action)) {
			t.Fatalf("allowed enforcementAction %v", action)
		}
		if _, found := spec["scopedEnforcementActions"]; found {
			t.Fatal("allowed scopedEnforcementActions")
		}
	default:
		t.Fatalf("allowed apiVersion %q", apiVersion)
	}
}
