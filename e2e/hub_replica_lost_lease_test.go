package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/shard"
)

// A replica whose membership Lease another holder takes (a partition, a process stalled past its
// renew deadline) stops: it exits with an error, so whatever runs it starts it again, instead of
// hanging neither working nor leaving (seen at 10,000 clusters: two replicas hung for good).
func TestHubReplicaThatLosesItsLeaseExits(t *testing.T) {
	binary := buildHubBinary(t)
	ensureHubNamespace(t)
	ctx := testContext(t)
	// Registered before the process, so it runs after it stopped: the stolen Lease goes too.
	cleanReplicaLeases(t)
	const name = "replica-lost"
	r := runReplica(t, binary, name)
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases(e2eHubNamespace)
	leaseName := policyhubv1.ReplicaLeaseName(e2eHubID, name)
	me := e2eHubID + "/" + name
	eventually(t, 60*time.Second, 200*time.Millisecond, "the replica holds its Lease", func() error {
		l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != me {
			return errors.New("held by " + h)
		}
		return nil
	})

	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	// Another holder, renewed now and for an hour: the replica's renewals fail from now on.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NowMicro()
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("someone-else"), ptr.To(int32(3600))
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()
	// It notices within its renew deadline; stopping its manager takes a little more.
	deadline := shard.RenewDeadline + 30*time.Second
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("the replica ended with %v, want a non-zero exit", err)
		}
		t.Logf("the replica exited %s after its Lease was taken: %v", time.Since(stolen).Round(100*time.Millisecond), err)
	case <-time.After(deadline):
		t.Fatalf("the replica still runs %s after its Lease was taken: it neither works nor stops", deadline)
	}
	log, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "this replica lost its Lease") {
		t.Errorf("the replica's log does not say it lost its Lease:\n%s", log[max(0, len(log)-3000):])
	}
}
