package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/work"
)

// buildHubBinary builds cmd/policyhub-hub into the test's temporary directory.
func buildHubBinary(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "policyhub-hub")
	build := exec.Command("go", "build", "-o", binary, "./cmd/policyhub-hub")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build policyhub-hub: %v\n%s", err, out)
	}
	return binary
}

// runHubProcess runs the hub binary against the fleet's hub until the test ends (extra flags
// after the defaults win); its output goes to the fleet's log directory.
func runHubProcess(t *testing.T, binary, identity string, extra ...string) *exec.Cmd {
	t.Helper()
	logFile, err := os.Create(filepath.Join(fleetOf(t).LogDir, "policyhub-hub-"+identity+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary,
		"--kubeconfig="+fleetOf(t).Hub.Kubeconfig,
		"--hub-id="+e2eHubID, "--identity="+e2eHubID+"/"+identity,
		"--gateway-secret-namespace="+fleetOf(t).SecretNamespace,
		"--leader-elect=false", // two writers on purpose: only the clusters' sync Leases keep them apart
		"--resync-interval=1s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopHubProcess(t, cmd)
		logFile.Close()
	})
	return cmd
}

// watchSyncLease watches a cluster's sync Lease, directly in the cluster, until the test ends.
func watchSyncLease(t *testing.T, ctx context.Context, cluster string) watch.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoordinationV1().Leases(work.LeaseNamespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + work.LeaseName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// leaseHolders watches a cluster's sync Lease and collects every holder it sees.
func leaseHolders(t *testing.T, ctx context.Context, cluster string) func() map[string]bool {
	t.Helper()
	w := watchSyncLease(t, ctx, cluster)
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			if lease, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
				if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
					mu.Lock()
					seen[h] = true
					mu.Unlock()
				}
			}
		}
	}()
	return func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for k := range seen {
			out[k] = true
		}
		return out
	}
}

// Two hub processes with different identities (and no leader election between them) sync the
// same FleetPolicies into the same clusters. The test holds both clusters' sync Leases first, so
// both processes have writes waiting and queue on the Leases (each reports LockHeld); once the
// Leases are free, every policy is synced with policyhub as its only writer, the Leases were held
// by the processes one at a time, and no process ever found a Lease taken from under it while it
// believed it held it (what concurrent writers of one process once caused).
func TestTwoHubProcessesTakeTurnsPerCluster(t *testing.T) {
	binary := buildHubBinary(t)
	ensureHubNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, c := range []string{"cluster-1", "cluster-2"} {
		holdLease(t, c, "test-gate", 60*time.Second)
	}
	// Registered before the processes, so it runs after they stopped: no Lease is left behind.
	t.Cleanup(func() {
		for _, c := range []string{"cluster-1", "cluster-2"} {
			deleteLease(t, c)
		}
	})
	holders1, holders2 := leaseHolders(t, ctx, "cluster-1"), leaseHolders(t, ctx, "cluster-2")
	runHubProcess(t, binary, "process-a")
	runHubProcess(t, binary, "process-b")

	const n = 6
	for i := range n {
		createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: e2e-two-hubs-%d}
spec:
  placement: {clusters: [cluster-1, cluster-2]}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, i, indentedSpec(fmt.Sprintf("two-hubs-%d", i))))
	}
	eventually(t, 60*time.Second, 200*time.Millisecond, "both processes queued on the held Leases", func() error {
		for _, identity := range []string{"process-a", "process-b"} {
			logged, err := os.ReadFile(filepath.Join(fleetOf(t).LogDir, "policyhub-hub-"+identity+".log"))
			if err != nil {
				return err
			}
			// The per-sync log line counts the declarations by phase.
			if !strings.Contains(string(logged), `"LockHeld":`) {
				return errorf("%s has not reported a held Lease yet", identity)
			}
		}
		return nil
	})
	for _, c := range []string{"cluster-1", "cluster-2"} {
		releaseLease(t, c)
	}
	both := map[string]policyhubv1.ClusterPhase{"cluster-1": "Synced", "cluster-2": "Synced"}
	for i := range n {
		waitFleetPolicy(t, fmt.Sprintf("e2e-two-hubs-%d", i), "synced in both", wantPhases(both))
	}
	for cluster, seen := range map[string]map[string]bool{"cluster-1": holders1(), "cluster-2": holders2()} {
		if !seen[e2eHubID+"/process-a"] && !seen[e2eHubID+"/process-b"] {
			t.Errorf("%s: no process held the sync Lease (holders seen: %v)", cluster, seen)
		}
	}
	for _, identity := range []string{"process-a", "process-b"} {
		logged, err := os.ReadFile(filepath.Join(fleetOf(t).LogDir, "policyhub-hub-"+identity+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(logged), "Failed to release lease") {
			t.Errorf("%s lost a cluster's sync Lease while it believed it held it (see its log)", identity)
		}
	}
	for i := range n {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(clusterPolicyGVK)
		obj.SetName(fmt.Sprintf("e2e-two-hubs-%d", i))
		for _, c := range []string{"cluster-1", "cluster-2"} {
			live, err := liveObject(t, c, obj)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			for _, mf := range live.GetManagedFields() {
				if mf.Operation == metav1.ManagedFieldsOperationApply && mf.Manager != work.FieldManager {
					t.Errorf("%s/%s: applied by %q as well as policyhub", c, obj.GetName(), mf.Manager)
				}
			}
		}
	}
}
