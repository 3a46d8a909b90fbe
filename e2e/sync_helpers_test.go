package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/gateway"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/work"
)

const e2eHubID = "e2e-hub"

func newSyncer(t *testing.T) *work.Syncer {
	t.Helper()
	s, err := work.NewSyncer(work.Options{HubID: e2eHubID, Lock: lockOptions(e2eHubID + "/test")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close) // runs after the test's own cleanups, which may still sync
	return s
}

func gatewayCluster(t *testing.T, name string) work.Cluster {
	t.Helper()
	cfg, err := gateway.ClusterConfig(fleetOf(t).Hub.Config, name)
	if err != nil {
		t.Fatal(err)
	}
	return work.Cluster{Name: name, Config: cfg}
}

// auditTemplate is a harmless Kyverno ClusterPolicy template: it audits only ConfigMaps carrying
// the label policyhub.io/e2e=<scope>, so it never gets in another test's way.
func auditTemplate(scope string) string {
	return fmt.Sprintf(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  background: false
  rules:
  - name: configmaps-need-owner
    match:
      any:
      - resources:
          kinds: [ConfigMap]
          selector:
            matchLabels:
              policyhub.io/e2e: %s
    validate:
      failureAction: Audit
      message: "configmaps need an owner label"
      pattern:
        metadata:
          labels:
            owner: "?*"
`, scope)
}

// kyvernoRefusedTemplate is a policy the CRD schema allows and Kyverno's admission refuses: a
// wildcard kind in a background policy.
const kyvernoRefusedTemplate = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
spec:
  background: true
  rules:
  - name: every-kind
    match:
      any:
      - resources:
          kinds: ["*"]
    validate:
      failureAction: Audit
      message: "everything needs an owner"
      pattern:
        metadata:
          labels:
            owner: "?*"
`

// renderFleetPolicy renders a FleetPolicy named name with the template, as the hub would.
func renderFleetPolicy(t *testing.T, name, template string, mode *policyhubv1.Mode) (*unstructured.Unstructured, string) {
	t.Helper()
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	data, err := yaml.YAMLToJSON([]byte(template))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &fp.Spec.Template); err != nil {
		t.Fatal(err)
	}
	obj, err := render.FleetPolicy(e2eHubID, fp, mode)
	if err != nil {
		t.Fatal(err)
	}
	return obj, render.Owner{HubID: e2eHubID, Kind: "FleetPolicy", Name: name}.Source()
}

// liveObject reads obj's live copy directly from a managed cluster (not through the gateway).
func liveObject(t *testing.T, cluster string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := directClient(t, fleetOf(t).Cluster(cluster).Config).Get(testContext(t), types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, live)
	return live, err
}

// onlyResult returns the single declaration result of a sync and fails unless its phase is want.
func onlyResult(t *testing.T, res *work.ClusterResult, want policyhubv1.ClusterPhase) *work.DeclarationResult {
	t.Helper()
	if len(res.Declarations) != 1 {
		t.Fatalf("%d declaration results, want 1", len(res.Declarations))
	}
	d := res.Declarations[0]
	if d.Phase != want {
		t.Fatalf("%s: phase %s (%s), want %s", res.Cluster, d.Phase, d.Message, want)
	}
	return d
}

// leaseVersion is the resourceVersion of the cluster's sync Lease ("" when there is none).
func leaseVersion(t *testing.T, cluster string) string {
	t.Helper()
	lease, err := gatewayClientset(t, cluster).CoordinationV1().Leases(work.LeaseNamespace).Get(testContext(t), work.LeaseName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return lease.ResourceVersion
}

// holdLease makes holder the cluster's sync Lease holder, renewed just now and valid for
// duration, as another writer would (taking over a Lease earlier syncs left released).
func holdLease(t *testing.T, cluster, holder string, duration time.Duration) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: work.LeaseNamespace}}, metav1.CreateOptions{})
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(duration.Seconds())), AcquireTime: &now, RenewTime: &now}
	leases := cs.CoordinationV1().Leases(work.LeaseNamespace)
	if existing, err := leases.Get(ctx, work.LeaseName, metav1.GetOptions{}); err == nil {
		existing.Spec = spec
		if _, err := leases.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: work.LeaseNamespace, Name: work.LeaseName}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// releaseLease empties the holder of the cluster's sync Lease, as leaderelection does on release.
func releaseLease(t *testing.T, cluster string) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cs.CoordinationV1().Leases(work.LeaseNamespace).Get(ctx, work.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To("")
	if _, err := cs.CoordinationV1().Leases(work.LeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteLease removes the cluster's sync Lease (test cleanup: no holder is left behind).
func deleteLease(t *testing.T, cluster string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.CoordinationV1().Leases(work.LeaseNamespace).Delete(context.Background(), work.LeaseName, metav1.DeleteOptions{})
}
