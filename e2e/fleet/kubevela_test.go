package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/policyhub/policyhub/internal/manifests"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const velaWebApp = `
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata: {name: web, namespace: default}
spec:
  components:
  - name: web
    type: webservice
    properties: {image: "nginx:1.27.3"}
    traits:
    - type: annotations
      properties: {"app.oam.dev/disable-health-check": "true"}
  policies:
  - name: where
    type: topology
    properties: {clusters: [cluster-1]}
`

// With Options.KubeVela, vela-core runs on the hub with the fleet's definitions: it takes the
// gateway's cluster Secrets as its clusters, its workflow deploys a webservice into cluster-1
// through the gateway and ends running, and deleting the Application removes the Deployment.
func TestKubeVelaDeploysThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := startTestFleet(t, Options{Managed: []ManagedCluster{{Name: "cluster-1"}}, KubeVela: true})
	ctx := t.Context()
	hub, err := client.New(f.Hub.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cluster1, err := client.New(f.Cluster("cluster-1").Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode([]byte(velaWebApp))
	if err != nil {
		t.Fatal(err)
	}
	app := objs[0]
	if err := hub.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(schema.GroupVersionKind{Group: "core.oam.dev", Version: "v1beta1", Kind: "Application"})
	deployment := types.NamespacedName{Namespace: "default", Name: "web"}
	waitFor(t, f, "the workflow deploys web into cluster-1 and ends running", func() error {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(live.Object, "status", "status"); phase != "running" {
			steps, _, _ := unstructured.NestedSlice(live.Object, "status", "workflow", "steps")
			return fmt.Errorf("Application phase %q, steps %v", phase, steps)
		}
		return cluster1.Get(ctx, deployment, &appsv1.Deployment{})
	})
	// vela-core stays out of the secret namespace's business: the gateway still has the cluster.
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, types.NamespacedName{Namespace: f.SecretNamespace, Name: "cluster-1"}, secret); err != nil {
		t.Errorf("cluster-1's gateway Secret: %v", err)
	}
	if err := hub.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitFor(t, f, "deleting the Application removes web from cluster-1", func() error {
		err := cluster1.Get(ctx, deployment, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("deployment %s still there", deployment)
		}
		return err
	})
}

// waitFor polls check until it returns nil, for up to a minute, failing at once if vela-core
// exits.
func waitFor(t *testing.T, f *Fleet, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := poll(ctx, 200*time.Millisecond, what, f.vela, func(context.Context) (bool, error) {
		if err := check(); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
