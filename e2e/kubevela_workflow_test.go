package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/e2e/fleet"
)

// velaWebShop is an Application KubeVela's own controller runs: a webservice deployed by the
// workflow to cluster-1 (health checks off: no kubelet runs here) with a kyverno-policy entry.
const velaWebShop = `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: webshop, namespace: %s}
spec:
  components:
  - name: web
    type: webservice
    properties: {image: "nginx:1.27.3"}
    traits:
    - type: annotations
      properties: {"app.oam.dev/disable-health-check": "true"}
  policies:
  - name: team
    type: kyverno-policy
    properties:
      mode: Audit
      scope: {kinds: [Deployment]}
      rules:
      - name: need-team
        validate: {message: "webshop Deployments need a team label", pattern: {metadata: {labels: {team: "?*"}}}}
  - name: where
    type: topology
    properties: {clusters: [cluster-1]}
`

// Under the real vela-core, an Application with a kyverno-policy entry is accepted and its
// workflow deploys the component into cluster-1, where the entry's policy is synced; the entry's
// status reaches the Application's status.policy next to vela-core's own status, and stays there
// across vela-core's periodic reconciles without a storm of writes to the Application.
func TestKubeVelaWorkflowRunsWithKyvernoPolicyEntry(t *testing.T) {
	inLane(t, "kubevela")
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "kv-workflow"
	hub := directClient(t, fleetOf(t).Hub.Config)
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, cluster1, ns)
	applyKubeVelaDefinitions(ctx, t, hub)
	app := createVelaApplication(ctx, t, hub, fmt.Sprintf(velaWebShop, ns))

	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	read := func() error { return hub.Get(ctx, client.ObjectKeyFromObject(app), live) }
	eventually(t, 90*time.Second, 200*time.Millisecond, "vela-core runs the workflow to the end", func() error {
		if err := read(); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(live.Object, "status", "status"); phase != "running" {
			steps, _, _ := unstructured.NestedSlice(live.Object, "status", "workflow", "steps")
			return fmt.Errorf("Application phase %q; steps %v", phase, steps)
		}
		return nil
	})
	if err := cluster1.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("the workflow finished but the component's Deployment is not in cluster-1: %v", err)
	}
	waitApplicationPolicy(t, ns, policyhubv1.KubeVelaEntryName("webshop", "team"), 60*time.Second, "the entry's ApplicationPolicy synced in cluster-1",
		apPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	entry := func() (map[string]any, error) { return velaEntryStatus(ctx, hub, app, live, "team") }
	eventually(t, 60*time.Second, 200*time.Millisecond, "the entry's status in the Application", func() error {
		_, err := entry()
		return err
	})

	// Three of vela-core's periodic reconciles: the Application is written a bounded number of
	// times (each write wakes both controllers), and keeps the entry and vela-core's own status.
	watcher, err := client.NewWithWatch(fleetOf(t).Hub.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	w, err := watcher.Watch(ctx, apps, client.InNamespace(ns), client.MatchingFields{"metadata.name": app.GetName()},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: live.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	window := 3 * fleet.KubeVelaResync
	end := time.After(window)
	writes := 0
	for watching := true; watching; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the Application ended early")
			}
			if ev.Type == watch.Modified {
				writes++
			}
		case <-end:
			watching = false
		}
	}
	t.Logf("the Application was written %d times over %s of vela-core resyncs", writes, window)
	if writes > 3 {
		t.Errorf("the Application was written %d times in %s with nothing changing: a reconcile storm", writes, window)
	}
	if _, err := entry(); err != nil {
		t.Errorf("after vela-core's resyncs: %v", err)
	}
	if phase, _, _ := unstructured.NestedString(live.Object, "status", "status"); phase != "running" {
		t.Errorf("after vela-core's resyncs the Application is %q, want running", phase)
	}

	// Deleting the Application removes everything made for it: the component (KubeVela's) and
	// the entry's ApplicationPolicy and its policy in cluster-1 (policyhub's).
	if err := hub.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "the Application's Deployment and policies gone from cluster-1", func() error {
		if err := cluster1.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("deployment web: %v", err)
		}
		if got := ownedPolicies(t, "cluster-1", "kyverno.io/v1", "Policy", ns); len(got) != 0 {
			return fmt.Errorf("cluster-1 still holds %v", got)
		}
		err := hub.Get(ctx, types.NamespacedName{Namespace: ns, Name: policyhubv1.KubeVelaEntryName("webshop", "team")}, &policyhubv1.ApplicationPolicy{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the entry's ApplicationPolicy: %v", err)
		}
		return nil
	})
}

// velaGate is an Application whose workflow waits for its kyverno-policy entries (the
// kyverno-policy-ready step) before it deploys a component that the Enforce entry forbids.
const velaGate = `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: gate, namespace: %s}
spec:
  components:
  - name: web
    type: webservice
    properties: {image: "nginx:latest"}
    traits:
    - type: annotations
      properties: {"app.oam.dev/disable-health-check": "true"}
  policies:
  - name: no-latest
    type: kyverno-policy
    properties:
      mode: Enforce
      scope: {kinds: [Deployment]}
      rules:
      - name: no-latest
        validate:
          message: "the image tag latest is not allowed: pin a version"
          pattern: {spec: {template: {spec: {containers: [{image: "!*:latest"}]}}}}
  - name: where
    type: topology
    properties: {clusters: [cluster-1]}
  workflow:
    steps:
    - {name: policies, type: kyverno-policy-ready}
    - {name: deploy, type: deploy, properties: {policies: [where]}}
`

// With the kyverno-policy-ready step first, an Enforce entry is in force before the workflow
// deploys: Kyverno refuses the very first deploy of a violating component, and its message is the
// deploy step's message. A fixed component, published as a new version, deploys.
func TestKubeVelaEnforceEntryRefusesTheFirstDeploy(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	const ns = "kv-enforce"
	hub := directClient(t, fleetOf(t).Hub.Config)
	cluster1 := directClient(t, fleetOf(t).Cluster("cluster-1").Config)
	createNamespace(ctx, t, hub, ns)
	grantTenant(ctx, t, ns)
	createNamespace(ctx, t, cluster1, ns)
	applyKubeVelaDefinitions(ctx, t, hub)
	app := createVelaApplication(ctx, t, hub, fmt.Sprintf(velaGate, ns))

	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	var message string
	eventually(t, 120*time.Second, 200*time.Millisecond, "Kyverno's denial in the deploy step's message", func() error {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
			return err
		}
		steps, _, _ := unstructured.NestedSlice(live.Object, "status", "workflow", "steps")
		for _, s := range steps {
			step, _ := s.(map[string]any)
			if step["name"] == "deploy" && strings.Contains(fmt.Sprint(step["message"]), "denied") {
				message = fmt.Sprint(step["message"])
				t.Logf("steps: %v", steps)
				return nil
			}
		}
		return fmt.Errorf("steps %v", steps)
	})
	t.Logf("deploy step message: %s", message)
	for _, want := range []string{"the image tag latest is not allowed: pin a version", policyhubv1.KubeVelaEntryName("gate", "no-latest")} {
		if !strings.Contains(message, want) {
			t.Errorf("the deploy step's message %q does not contain %q", message, want)
		}
	}
	deployment := types.NamespacedName{Namespace: ns, Name: "web"}
	if err := cluster1.Get(ctx, deployment, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the violating Deployment reached cluster-1 (Get: %v): the deploy raced the policy", err)
	}

	updateVelaApplication(t, hub, ns, "gate", func(app *unstructured.Unstructured) {
		components, _, _ := unstructured.NestedSlice(app.Object, "spec", "components")
		if err := unstructured.SetNestedField(components[0].(map[string]any), "nginx:1.27.3", "properties", "image"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(app.Object, components, "spec", "components"); err != nil {
			t.Fatal(err)
		}
		// KubeVela restarts a failed workflow for a new published version.
		annotations := app.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["app.oam.dev/publishVersion"] = "pinned"
		app.SetAnnotations(annotations)
	})
	eventually(t, 120*time.Second, 200*time.Millisecond, "the pinned image deployed", func() error {
		d := &appsv1.Deployment{}
		if err := cluster1.Get(ctx, deployment, d); err != nil {
			return err
		}
		if image := d.Spec.Template.Spec.Containers[0].Image; image != "nginx:1.27.3" {
			return fmt.Errorf("image %s", image)
		}
		return nil
	})
}
