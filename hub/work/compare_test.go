package work

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// yamlObj is manifest decoded as objects from the API are (integers as int64).
func yamlObj(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return obj
}

const desiredPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
  annotations: {policyhub.io/content-hash: "sha256:1"}
spec:
  rules:
  - name: r
    validate:
      failureAction: Enforce
      pattern: {spec: {replicas: 3}}
`

func TestInSync(t *testing.T) {
	tests := []struct {
		name string
		live string
		want bool
	}{
		{name: "identical", live: desiredPolicy, want: true},
		{name: "server additions do not count", want: true, live: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
  resourceVersion: "42"
  annotations: {policyhub.io/content-hash: "sha256:1", other: x}
spec:
  admission: true
  background: true
  rules:
  - name: r
    skipBackgroundRequests: true
    validate:
      failureAction: Enforce
      allowExistingViolations: true
      pattern: {spec: {replicas: 3}}
status: {ready: true}
`},
		{name: "a number decoded as float64 equals its int64", want: true, live: strings.Replace(desiredPolicy, "replicas: 3", "replicas: 3.0", 1)},
		{name: "edited in the cluster (drift)", want: false, live: strings.Replace(desiredPolicy, "failureAction: Enforce", "failureAction: Audit", 1)},
		{name: "a rule removed in the cluster", want: false, live: `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
  annotations: {policyhub.io/content-hash: "sha256:1"}
spec:
  rules: []
`},
		{name: "other content hash (the declaration changed)", want: false, live: strings.Replace(desiredPolicy, "sha256:1", "sha256:2", 1)},
		{name: "hash annotation removed in the cluster", want: false, live: strings.Replace(desiredPolicy, `annotations: {policyhub.io/content-hash: "sha256:1"}`, "annotations: {}", 1)},
	}
	desired := yamlObj(t, desiredPolicy)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inSync(desired, yamlObj(t, tt.live)); got != tt.want {
				t.Errorf("inSync = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	desired := yamlObj(t, desiredPolicy)
	live := yamlObj(t, strings.Replace(desiredPolicy, "failureAction: Enforce", "failureAction: Audit", 1))
	live.SetResourceVersion("7")
	d := diff(live, desired)
	for _, want := range []string{"--- live", "+++ after sync", "-      failureAction: Audit", "+      failureAction: Enforce"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "resourceVersion") {
		t.Errorf("diff shows server-managed metadata:\n%s", d)
	}
	created := diff(nil, desired)
	if !strings.Contains(created, "--- live (absent)") || !strings.Contains(created, "+kind: ClusterPolicy") {
		t.Errorf("diff of a new object:\n%s", created)
	}
	big := desired.DeepCopy()
	big.SetAnnotations(map[string]string{policyhubv1.AnnotationContentHash: strings.Repeat("x", 10000)})
	if d := diff(nil, big); len(d) > maxDiff || !strings.HasSuffix(d, "(diff cut at 4 KiB)\n") {
		t.Errorf("a long diff is %d bytes, ends %q; want ≤ %d, marked as cut", len(d), d[len(d)-30:], maxDiff)
	}
}
