package benchkit

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Template is the benchmark's i-th kyverno.io/v1 ClusterPolicy, as YAML: one small Audit rule,
// its name and selector numbered i so that no two policies are the same object. Both benchmarks
// write this same policy, so their numbers compare.
func Template(i int) string {
	return fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  background: false
  rules:
  - name: rule-%d
    match:
      any:
      - resources:
          kinds: [ConfigMap]
          selector:
            matchLabels:
              bench: policy-%d
    validate:
      failureAction: Audit
      message: "configmaps need an owner label"
      pattern:
        metadata:
          labels:
            owner: "?*"
`, i, i)
}

// FleetPolicy is the benchmark's i-th FleetPolicy, named name: Template(i), placed in every
// cluster whose labels include clusterLabels.
func FleetPolicy(name string, i int, clusterLabels map[string]string) (*policyhubv1.FleetPolicy, error) {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fp.Spec.Placement.ClusterSelector = &policyhubv1.ClusterSelector{MatchLabels: clusterLabels}
	if err := yaml.Unmarshal([]byte(Template(i)), &fp.Spec.Template); err != nil {
		return nil, fmt.Errorf("FleetPolicy %s: template %d: %w", name, i, err)
	}
	return fp, nil
}
