package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/cmd/kubectl-policyhub/app"
)

// The hub publishes its id on the hub, and kubectl policyhub finds it there: a dry-run of a
// FleetPolicy the hub synced, without --hub-id, sees the hub's own objects (unchanged), not
// someone else's (conflicts); --hub-id still overrides it.
func TestCLIFindsTheHubID(t *testing.T) {
	startHub(t, time.Hour)
	ctx := testContext(t)
	hub := directClient(t, fleetOf(t).Hub.Config)
	eventually(t, 30*time.Second, 200*time.Millisecond, "the hub's id published", func() error {
		cm := &corev1.ConfigMap{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: e2eHubNamespace, Name: policyhubv1.HubInfoName}, cm); err != nil {
			return err
		}
		if cm.Data[policyhubv1.HubInfoIDKey] != e2eHubID || cm.Labels[policyhubv1.LabelHubInfo] != "true" {
			return errorf("ConfigMap %v %v", cm.Labels, cm.Data)
		}
		return nil
	})
	fp := createFleetPolicy(t, `
metadata: {name: e2e-cli-hub-id}
spec:
  placement: {clusters: [cluster-1]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: `+indentedSpec("cli-hub-id"))
	waitFleetPolicy(t, fp.Name, "synced", wantPhases(map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced"}))

	dryRun := func(extra ...string) (unchanged, conflict int32) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"--kubeconfig", fleetOf(t).Hub.Kubeconfig, "--gateway-secret-namespace", fleetOf(t).SecretNamespace,
			"sync", "--dry-run", "--policy", fp.Name, "-o", "json"}, extra...)
		code := app.Run(ctx, args, app.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		var report struct {
			Totals struct{ Unchanged, Conflict int32 } `json:"totals"`
		}
		if err := json.Unmarshal(out.Bytes(), &report); err != nil {
			t.Fatalf("sync --dry-run %v: exit %d, %v\n%s\n%s", extra, code, err, out.String(), errOut.String())
		}
		return report.Totals.Unchanged, report.Totals.Conflict
	}
	if unchanged, conflict := dryRun(); unchanged != 1 || conflict != 0 {
		t.Errorf("without --hub-id: unchanged %d, conflict %d; want the hub's own policy unchanged", unchanged, conflict)
	}
	// Whoever may write a ConfigMap elsewhere publishes an id of their own like the hub's: the CLI
	// reads only the hub's namespace, so it still plans as the hub.
	const elsewhere = "e2e-cli-hub-id-impostor"
	createNamespace(ctx, t, hub, elsewhere)
	impostor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: policyhubv1.HubInfoName,
		Labels: map[string]string{policyhubv1.LabelHubInfo: "true"}}, Data: map[string]string{policyhubv1.HubInfoIDKey: "impostor"}}
	if err := hub.Create(ctx, impostor); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), impostor) })
	if unchanged, conflict := dryRun(); unchanged != 1 || conflict != 0 {
		t.Errorf("with another hub id published in namespace %s: unchanged %d, conflict %d; want the hub's own policy unchanged", elsewhere, unchanged, conflict)
	}
	// The hub's namespace is a flag: in another, the hub's id is not found (the default id is used).
	if unchanged, conflict := dryRun("--hub-namespace", elsewhere); conflict != 1 || unchanged != 0 {
		t.Errorf("--hub-namespace %s: unchanged %d, conflict %d; want the id published there (impostor), the policy seen as another hub's", elsewhere, unchanged, conflict)
	}
	if unchanged, conflict := dryRun("--hub-id", "another-hub"); conflict != 1 || unchanged != 0 {
		t.Errorf("--hub-id another-hub: unchanged %d, conflict %d; want the policy seen as another hub's (conflict)", unchanged, conflict)
	}
}
