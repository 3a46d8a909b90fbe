package fleet

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Which Kyverno a cluster runs is, in a real cluster, what its Deployments say: Kyverno's Helm
// chart (charts/kyverno/templates/{admission,reports}-controller/deployment.yaml) runs the
// admission controller as Deployment kyverno-admission-controller (container "kyverno", image
// reg.kyverno.io/kyverno/kyverno:<version>) and the reports controller as
// kyverno-reports-controller (container "controller", image
// reg.kyverno.io/kyverno/reports-controller:<version>), labelled app.kubernetes.io/component,
// part-of and instance. The fleet runs Kyverno as processes, so it makes the same Deployments in
// namespace kyverno, with the real version and the flags it started each process with: the same
// signal a real cluster offers. No kubelet runs: they never run. Kyverno is told to leave its own
// namespace alone, as the chart does (config.excludeKyvernoNamespace), so policies that match
// Deployments never see them.

// Kyverno's Deployments in KyvernoNamespace, as its Helm chart names them.
const (
	KyvernoAdmissionDeployment = "kyverno-admission-controller"
	KyvernoReportsDeployment   = "kyverno-reports-controller"
)

// kyvernoCharts is the chart version (charts/kyverno/Chart.yaml) of each Kyverno version the fleet
// runs, for the chart's labels.
var kyvernoCharts = map[string]string{KyvernoVersion: "3.9.1", Kyverno116Version: "3.6.3"}

// kyvernoComponent is one of Kyverno's controllers as the chart deploys it.
type kyvernoComponent struct {
	deployment, component, container, image string
}

var (
	kyvernoAdmission = kyvernoComponent{KyvernoAdmissionDeployment, "admission-controller", "kyverno", "reg.kyverno.io/kyverno/kyverno"}
	kyvernoReports   = kyvernoComponent{KyvernoReportsDeployment, "reports-controller", "controller", "reg.kyverno.io/kyverno/reports-controller"}
)

// kyvernoSignal is what the fleet writes in a cluster where it starts Kyverno of version: the
// chart's ConfigMap (only its resource filter of Kyverno's namespace) and the controllers'
// Deployments, whose container args are the flags the processes run with (but --kubeconfig, a path
// on this machine; a pod reads its service account instead).
func kyvernoSignal(version string, admissionArgs, reportsArgs []string) []*unstructured.Unstructured {
	config := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kyverno", "namespace": KyvernoNamespace},
		"data":     map[string]any{"resourceFilters": "[*/*," + KyvernoNamespace + ",*]"},
	}}
	return []*unstructured.Unstructured{config,
		kyvernoDeployment(kyvernoAdmission, version, admissionArgs), kyvernoDeployment(kyvernoReports, version, reportsArgs)}
}

func kyvernoDeployment(c kyvernoComponent, version string, args []string) *unstructured.Unstructured {
	chart := kyvernoCharts[version]
	selector := map[string]any{
		"app.kubernetes.io/component": c.component,
		"app.kubernetes.io/instance":  "kyverno",
		"app.kubernetes.io/part-of":   "kyverno",
	}
	labels := map[string]any{
		"app.kubernetes.io/version":    chart,
		"helm.sh/chart":                "kyverno-" + chart,
		"app.kubernetes.io/managed-by": "Helm",
	}
	for k, v := range selector {
		labels[k] = v
	}
	var containerArgs []any
	for _, a := range args {
		if !strings.HasPrefix(a, "--kubeconfig") {
			containerArgs = append(containerArgs, a)
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": c.deployment, "namespace": KyvernoNamespace, "labels": labels},
		"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": selector},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"serviceAccountName": c.deployment,
					"containers": []any{map[string]any{
						"name":  c.container,
						"image": c.image + ":" + version,
						"args":  containerArgs,
					}},
				},
			},
		},
	}}
}

// SayKyvernoVersion makes the cluster's Kyverno Deployments say version (their containers' image
// tag), as an upgrade of Kyverno would, without changing the Kyverno that runs: a cluster that
// "runs" e.g. v1.20.0 to whoever reads the signal. restore puts back the version that runs.
func (c *Cluster) SayKyvernoVersion(ctx context.Context, version string) (restore func(context.Context) error, err error) {
	if c.KyvernoVersion == "" {
		return nil, fmt.Errorf("cluster %s runs no Kyverno", c.Name)
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	say := func(ctx context.Context, version string) error {
		for _, k := range []kyvernoComponent{kyvernoAdmission, kyvernoReports} {
			patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, k.container, k.image+":"+version)
			d := &unstructured.Unstructured{}
			d.SetAPIVersion("apps/v1")
			d.SetKind("Deployment")
			d.SetNamespace(KyvernoNamespace)
			d.SetName(k.deployment)
			// A strategic merge patch merges containers by name: only the image changes.
			if err := cl.Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("cluster %s: Deployment %s says Kyverno %s: %w", c.Name, k.deployment, version, err)
			}
		}
		return nil
	}
	if err := say(ctx, version); err != nil {
		return nil, err
	}
	running := c.KyvernoVersion
	return func(ctx context.Context) error { return say(ctx, running) }, nil
}
