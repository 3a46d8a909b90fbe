package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The fleet behaves like a real cluster where policyhub depends on it: kube-controller-manager's
// garbage collector cascades ownerReferences (Kyverno's per-resource reports go with their
// resource) and its namespace controller finishes deleting a namespace, in the hub and in every
// managed cluster.
func TestFleetCascadesAndDeletesNamespaces(t *testing.T) {
	inParallel(t)
	ctx := testContext(t)
	for _, cfg := range []struct {
		name string
		c    client.Client
	}{{"hub", directClient(t, fleetOf(t).Hub.Config)}, {"cluster-1", directClient(t, fleetOf(t).Cluster("cluster-1").Config)}} {
		t.Run(cfg.name, func(t *testing.T) {
			c := cfg.c
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-kcm"}}
			if err := c.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent", Namespace: ns.Name}}
			if err := c.Create(ctx, parent); err != nil {
				t.Fatal(err)
			}
			child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: ns.Name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID,
			}}}}
			if err := c.Create(ctx, child); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, parent); err != nil {
				t.Fatal(err)
			}
			gone(ctx, t, c, child, "the child of a deleted owner")
			if err := c.Delete(ctx, ns); err != nil {
				t.Fatal(err)
			}
			gone(ctx, t, c, ns, "a deleted namespace")
		})
	}
}

// gone waits until obj no longer exists.
func gone(ctx context.Context, t *testing.T, c client.Client, obj client.Object, what string) {
	t.Helper()
	eventually(t, 90*time.Second, 300*time.Millisecond, what+" is gone", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v, deletionTimestamp %v)", err, obj.GetDeletionTimestamp())
	})
}
