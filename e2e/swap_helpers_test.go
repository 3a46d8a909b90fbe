package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render/tocel"
)

// Moving to CEL on the local fleet: kyverno/policies' best-practices policies (the converter's
// test data), each as a FleetPolicy rolled out in two waves (staging: cluster-1, prod:
// cluster-2), then swapped for its conversion under a parity gate.

// bestPractice reads the kyverno/policies policy of the converter's test data (file, e.g.
// "disallow-latest-tag"), named name, its rules matching only namespace ns (the fleet is shared).
func bestPractice(t *testing.T, file, name, ns string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "hub", "render", "tocel", "testdata", "kyverno-policies", file, file+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	policy := &unstructured.Unstructured{Object: obj}
	policy.SetName(name)
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "rules")
	for _, r := range rules {
		rule := r.(map[string]any)
		for _, block := range []string{"any", "all"} {
			filters, _, _ := unstructured.NestedSlice(rule, "match", block)
			for _, f := range filters {
				if res, ok := f.(map[string]any)["resources"].(map[string]any); ok {
					res["namespaces"] = []any{ns}
				}
			}
			if len(filters) > 0 {
				if err := unstructured.SetNestedSlice(rule, filters, "match", block); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := unstructured.SetNestedSlice(policy.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	return policy
}

// converted is the policy's conversion to a ValidatingPolicy, as `kubectl policyhub convert`
// makes it.
func converted(t *testing.T, legacy *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	res, err := tocel.Convert(legacy)
	if err != nil {
		t.Fatalf("convert %s: %v", legacy.GetName(), err)
	}
	if res.Policy == nil {
		t.Fatalf("convert %s: not converted: %+v", legacy.GetName(), res.Report)
	}
	return res.Policy
}

// templateOf is a policy as a FleetPolicy's template.
func templateOf(t *testing.T, policy *unstructured.Unstructured) policyhubv1.PolicyTemplate {
	t.Helper()
	spec, err := json.Marshal(policy.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return policyhubv1.PolicyTemplate{APIVersion: policy.GetAPIVersion(), Kind: policy.GetKind(),
		Metadata: policyhubv1.TemplateMetadata{Name: policy.GetName(), Annotations: policy.GetAnnotations()},
		Spec:     &runtime.RawExtension{Raw: spec}}
}

// createSwappable creates a FleetPolicy of the legacy policy on cluster-1 (wave staging) and
// cluster-2 (wave prod) under a parity gate of maxDiffering, and waits until this first version
// is rolled out (every wave Done: Enforce everywhere, the stable version).
func createSwappable(t *testing.T, name string, legacy *unstructured.Unstructured, maxDiffering int64) {
	t.Helper()
	fp := &policyhubv1.FleetPolicy{TypeMeta: metav1.TypeMeta{APIVersion: policyhubv1.GroupVersion.String(), Kind: policyhubv1.KindFleetPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: name}}
	fp.Spec.Template = templateOf(t, legacy)
	fp.Spec.Placement.Clusters = []string{"cluster-1", "cluster-2"}
	fp.Spec.Rollout = &policyhubv1.Rollout{
		Waves: []policyhubv1.RolloutWave{
			{Name: "staging", Clusters: []string{"cluster-1"}, Gate: policyhubv1.RolloutGate{MaxFail: 100}},
			{Name: "prod", Clusters: []string{"cluster-2"}, Gate: policyhubv1.RolloutGate{MaxFail: 100}},
		},
		PreviewGate: &policyhubv1.PreviewGate{Parity: &policyhubv1.ParityGate{MaxDiffering: maxDiffering}},
	}
	manifest, err := yaml.Marshal(fp)
	if err != nil {
		t.Fatal(err)
	}
	createFleetPolicy(t, string(manifest))
	waitSwapped(t, name, "the legacy version rolled out: every wave Done")
}

// waitSwapped waits until the FleetPolicy's current version completed its rollout.
func waitSwapped(t *testing.T, name, what string) *fleetView {
	t.Helper()
	var fp *fleetView
	eventually(t, 5*time.Minute, 500*time.Millisecond, name+": "+what, func() error {
		var err error
		if fp, err = fleetPolicyWithClusters(testContext(t), directClient(t, fleetOf(t).Hub.Config), name); err != nil {
			return err
		}
		st := fp.Status.Rollout
		if fp.Status.ObservedGeneration != fp.Generation || st == nil || st.Stable == nil || st.Stable.Revision != st.Revision ||
			wave(fp, "staging").Phase != policyhubv1.WaveDone || wave(fp, "prod").Phase != policyhubv1.WaveDone {
			if p := fp.Status.Preview; p != nil {
				return fmt.Errorf("waves %s; preview %d of %d reported, differing %+v", wavePhases(fp), p.Reported, p.Clusters, p.FirstDiffering)
			}
			return fmt.Errorf("waves %s", wavePhases(fp))
		}
		return nil
	})
	return fp
}

// swapTo replaces the FleetPolicy's template with policy (its conversion).
func swapTo(t *testing.T, name string, policy *unstructured.Unstructured) {
	t.Helper()
	tmpl := templateOf(t, policy)
	updateFleetPolicy(t, name, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Template = tmpl })
}

// policyIn reads the policy of kind (a GroupVersionKind) and name in the cluster; nil when there
// is none.
func policyIn(t *testing.T, cluster string, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	t.Helper()
	want := &unstructured.Unstructured{}
	want.SetGroupVersionKind(gvk)
	want.SetName(name)
	live, err := liveObject(t, cluster, want)
	if err != nil {
		return nil
	}
	return live
}

var validatingPolicyGVK = schema.GroupVersionKind{Group: "policies.kyverno.io", Version: "v1", Kind: "ValidatingPolicy"}

// podDeployment is a Deployment of namespace ns whose one container runs image, with probes and
// resources when asked.
func podDeployment(ns, name, image string, probes, resources bool) *appsv1.Deployment {
	c := corev1.Container{Name: "app", Image: image}
	if probes {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	}
	if resources {
		c.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
		}
	}
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}},
		},
	}
}

// refusalWatch creates violating Deployments as server-side dry-runs, over and over, until
// stopped, and keeps every one Kyverno admitted: the policies they violate must be enforced at
// every moment.
type refusalWatch struct {
	stop     context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	tries    int
	admitted []string
}

// watchRefusals starts a refusalWatch of the violating Deployments (each violating one policy,
// named in the map's key) in the clusters.
func watchRefusals(t *testing.T, clusters []string, violating map[string]*appsv1.Deployment) *refusalWatch {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	w := &refusalWatch{stop: stop, done: make(chan struct{})}
	clients := map[string]client.Client{}
	for _, c := range clusters {
		clients[c] = directClient(t, fleetOf(t).Cluster(c).Config)
	}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for _, cluster := range clusters {
				for policy, d := range violating {
					err := clients[cluster].Create(ctx, d.DeepCopy(), client.DryRunAll)
					if ctx.Err() != nil {
						return
					}
					w.mu.Lock()
					w.tries++
					switch {
					case err == nil:
						w.admitted = append(w.admitted, fmt.Sprintf("%s: %s (violating %s) admitted at %s", cluster, d.Name, policy, time.Now().Format(time.StampMilli)))
					case !strings.Contains(err.Error(), "denied the request"):
						w.admitted = append(w.admitted, fmt.Sprintf("%s: %s (violating %s) not refused by Kyverno at %s: %v", cluster, d.Name, policy, time.Now().Format(time.StampMilli), err))
					}
					w.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // pacing the probes, not waiting for a state
			}
		}
	}()
	return w
}

// end stops the watch and reports how many dry-runs it made and which were admitted.
func (w *refusalWatch) end() (tries int, admitted []string) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tries, w.admitted
}

// unstructuredStrings reads a string list of obj at path.
func unstructuredStrings(obj *unstructured.Unstructured, path ...string) ([]string, bool, error) {
	return unstructured.NestedStringSlice(obj.Object, path...)
}

// waitRefusedDeployment dry-runs the Deployment in the cluster until Kyverno refuses it by the
// policy.
func waitRefusedDeployment(t *testing.T, cluster, policy string, d *appsv1.Deployment) {
	t.Helper()
	c := directClient(t, fleetOf(t).Cluster(cluster).Config)
	eventually(t, 30*time.Second, 500*time.Millisecond, "Kyverno refuses "+d.Name+" in "+cluster, func() error {
		err := c.Create(testContext(t), d.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), policy) {
			return fmt.Errorf("not refused by %s: %v", policy, err)
		}
		return nil
	})
}
