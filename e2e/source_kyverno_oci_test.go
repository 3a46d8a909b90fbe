package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyhub/policyhub/hub/source"
	"github.com/policyhub/policyhub/internal/registrytest"
)

// A policy library pushed by the real Kyverno CLI (`kyverno oci push`, built from the same module
// as the fleet's Kyverno) to an OCI registry behind basic auth is read by hub/source as the CLI
// wrote it: pinned to the manifest's digest, each ClusterPolicy and Policy stripped to what a
// policy is. The ValidatingPolicy in the pushed folder is not in the artifact: the v1.19 CLI
// pushes only kyverno.io kinds. Wrong credentials read nothing.
func TestKyvernoCLIPushedLibraryIsRead(t *testing.T) {
	const user, password = "platform", "s3cret"
	host := registrytest.Serve(t, user, password)

	ref := host + "/policies/baseline:v1"
	digest := kyvernoPush(t, ref, user, password, map[string]string{
		"require-labels.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-labels
  annotations:
    policies.kyverno.io/severity: medium
spec:
  rules:
  - name: check-team
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: Audit
      message: "label team is required"
      pattern:
        metadata:
          labels:
            team: "?*"
`,
		"limits.yaml": `apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: require-limits
  namespace: shop
spec:
  rules:
  - name: limits
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: Audit
      message: "memory limits are required"
      pattern:
        spec:
          containers:
          - resources:
              limits:
                memory: "?*"
`,
		"disallow-host-path.yaml": `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata:
  name: disallow-host-path
spec:
  validationActions: [Audit]
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [pods]
  validations:
  - expression: "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))"
`,
	})

	art, err := source.PullOCI(testContext(t), ref, registrytest.Keychain(user, password), source.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if art.Digest != digest {
		t.Errorf("digest %s, want the manifest's %s", art.Digest, digest)
	}
	var got []string
	for _, p := range art.Policies {
		got = append(got, fmt.Sprintf("%s %s/%s", p.GetKind(), p.GetNamespace(), p.GetName()))
		if _, ok := p.Object["status"]; ok {
			t.Errorf("%s kept the status the CLI wrote", p.GetName())
		}
		if _, ok := p.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
			t.Errorf("%s kept the creationTimestamp the CLI wrote", p.GetName())
		}
	}
	if want := "[ClusterPolicy /require-labels Policy shop/require-limits]"; fmt.Sprint(got) != want {
		t.Errorf("policies %v, want %s (the ValidatingPolicy is not pushed by the v1.19 CLI)", got, want)
	}
	if sev := art.Policies[0].GetAnnotations()["policies.kyverno.io/severity"]; sev != "medium" {
		t.Errorf("the annotations were lost: %v", art.Policies[0].GetAnnotations())
	}

	if _, err := source.PullOCI(testContext(t), ref, registrytest.Keychain(user, "wrong"), source.DefaultLimits); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with wrong credentials: %v, want a 401", err)
	}
}
