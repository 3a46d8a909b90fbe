package evaluate

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/policyhub/policyhub/agent/collect"
)

// benchExpressions are typical validations; policy i uses benchExpressions[i % len].
var benchExpressions = []string{
	"has(object.metadata.labels) && 'team' in object.metadata.labels",
	"object.spec.replicas <= 5",
	"object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))",
	"object.spec.template.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && 'memory' in c.resources.limits)",
	"!has(object.spec.template.spec.hostNetwork) || !object.spec.template.spec.hostNetwork",
}

// BenchmarkEvaluate judges 10,000 Deployments held in memory against 20 bound policies, each
// matching every Deployment (200,000 judgements an op), as the agent's evaluation does after
// listing; the list's cost through a real API server is measured by make bench-vap.
func BenchmarkEvaluate(b *testing.B) {
	const objects, policies = 10_000, 20
	in := SetInput{AllNamespaces: true}
	for i := range 100 {
		in.Namespaces = append(in.Namespaces, namespace(fmt.Sprintf("bench-%03d", i), nil))
	}
	for i := range policies {
		name := fmt.Sprintf("bench-vap-%02d", i)
		p := policy(b, fmt.Sprintf(`
metadata: {name: %s}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE, UPDATE]}]
  validations:
  - expression: %q
    message: bench rule
`, name, benchExpressions[i%len(benchExpressions)]))
		in.Policies = append(in.Policies, p)
		in.Bindings = append(in.Bindings, binding(name, name, admissionregistrationv1.Audit))
	}
	objs := make([]*unstructured.Unstructured, objects)
	for i := range objs {
		labels := map[string]any{"app": fmt.Sprintf("app-%d", i)}
		if i%10 != 0 {
			labels["team"] = "t"
		}
		d := deployment(fmt.Sprintf("bench-%03d", i%100), fmt.Sprintf("dep-%05d", i), labels)
		d.Object["spec"] = map[string]any{"replicas": int64(1 + i%4), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27"}}}}}
		objs[i] = d
	}
	ctx := context.Background()
	var digests []*collect.Digest
	b.ResetTimer()
	for b.Loop() {
		set, _ := NewSet(in)
		digests = digests[:0]
		for _, o := range objs {
			d, err := set.Evaluate(ctx, o, deployments)
			if err != nil {
				b.Fatal(err)
			}
			digests = append(digests, d)
		}
	}
	b.StopTimer()
	// What the results hold: the heap with them, less the heap once they are dropped.
	var held, dropped runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&held)
	n := len(digests)
	digests = nil
	runtime.GC()
	runtime.ReadMemStats(&dropped)
	b.ReportMetric((float64(held.HeapAlloc)-float64(dropped.HeapAlloc))/(1<<20), "MiB-results")
	b.ReportMetric(float64(n), "digests")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(objects*policies), "µs/judgement")
}
