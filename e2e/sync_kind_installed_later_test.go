package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// A cluster that does not serve a kind is Unsupported for it; once the kind is installed there
// (Kyverno installed or upgraded), the same syncer sends it after its discovery recheck, without
// a restart: the hub asks the cluster about one API group at a time and does not trust a "not
// served" forever.
func TestSyncKindInstalledLaterIsSynced(t *testing.T) {
	ctx := testContext(t)
	s, err := work.NewSyncer(work.Options{HubID: e2eHubID, Lock: lockOptions(e2eHubID + "/test"), DiscoveryRecheck: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const group = "later.e2e.policyhub.io"
	widget, source := renderFleetPolicy(t, "e2e-kind-later", fmt.Sprintf(`
apiVersion: %s/v1
kind: Widget
spec:
  size: 3
`, group), nil)
	cluster := gatewayCluster(t, "cluster-1")
	decl := []work.Declaration{{Source: source, Objects: []*unstructured.Unstructured{widget}, Prune: true}}

	res := s.Sync(ctx, cluster, decl)
	if d := res.Declarations[0]; d.Phase != policyhubv1.ClusterPhaseUnsupported {
		t.Fatalf("before the CRD: phase %s (%s), want Unsupported", d.Phase, d.Message)
	}

	direct := directClient(t, fleetOf(t).Managed[0].Config)
	crd := object(t, fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group))
	apply(ctx, t, direct, crd)
	t.Cleanup(func() {
		s.Sync(context.Background(), cluster, []work.Declaration{{Source: source, Prune: true}})
		if err := direct.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete the CRD: %v", err)
		}
	})

	eventually(t, 60*time.Second, 500*time.Millisecond, "the Widget synced once its CRD is served", func() error {
		d := s.Sync(ctx, cluster, decl).Declarations[0]
		if d.Phase != policyhubv1.ClusterPhaseSynced {
			return fmt.Errorf("phase %s: %s", d.Phase, d.Message)
		}
		return nil
	})
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(widget.GroupVersionKind())
	if err := direct.Get(ctx, client.ObjectKeyFromObject(widget), live); err != nil {
		t.Fatalf("the Widget is not in the cluster: %v", err)
	}
}
