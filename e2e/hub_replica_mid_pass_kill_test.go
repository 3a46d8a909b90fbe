package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/shard"
	"github.com/policyhub/policyhub/hub/work"
)

// Six clusters on three replicas; the replica working the slow one is SIGKILLed while it holds
// that cluster's sync Lease in the middle of a pass. The next change reaches the cluster within
// 30 s of the kill (the new owner takes the Lease as soon as membership judges the holder dead,
// not a full Lease duration after it first saw the Lease), and no replica held the Lease while
// the killed one could still write.
func TestHubReplicaKilledMidPassHandsOverWithin30s(t *testing.T) {
	binary := buildHubBinary(t)
	ensureHubNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// midpass-0 is cluster-2 reached through a link that delays every request (its passes last
	// seconds, so the kill lands inside one), pinned to the victim; the other five are cluster-1.
	slow := startSlowLink(t, fleetOf(t).Cluster("cluster-2").URL, 250*time.Millisecond)
	var clusters []string
	for i := range 6 {
		name := fmt.Sprintf("midpass-%d", i)
		endpoint, like := fleetOf(t).Cluster("cluster-1").URL, "cluster-1"
		labels := map[string]string{"e2e-midpass": "yes"}
		if i == 0 {
			endpoint, like = slow.URL(), "cluster-2"
			labels[policyhubv1.LabelPinnedReplica] = "replica-a"
		}
		if err := fleetOf(t).AddClusterSecret(ctx, name, endpoint, like, labels); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleetOf(t).RemoveClusterSecret(context.Background(), name) })
		clusters = append(clusters, name)
	}
	fleetSize := len(fleetOf(t).Managed) + len(clusters)
	// Registered before the processes, so it runs after they stopped.
	cleanReplicaLeases(t, "cluster-1", "cluster-2")
	takeovers := leaseTakeovers(t, ctx, "cluster-2")
	holders := watchHolders(t, ctx, "cluster-2")
	a, b, c := runReplica(t, binary, "replica-a"), runReplica(t, binary, "replica-b"), runReplica(t, binary, "replica-c")
	assigned := waitShares(t, []*hubReplica{a, b, c}, []string{"replica-a", "replica-b", "replica-c"}, fleetSize)
	if owner := assigned.Owner("midpass-0"); owner != "replica-a" {
		t.Fatalf("midpass-0, pinned to replica-a, is worked by %s", owner)
	}

	const policy = "e2e-midpass"
	createFleetPolicy(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  placement: {clusterSelector: {matchLabels: {e2e-midpass: "yes"}}}
  template:
    apiVersion: kyverno.io/v1
    kind: ClusterPolicy
    spec: %s`, policy, indentedSpec("midpass")))
	syncedAt := func(fp *fleetView) error {
		if fp.Status.ObservedGeneration != fp.Generation {
			return fmt.Errorf("status is of generation %d, spec is %d", fp.Status.ObservedGeneration, fp.Generation)
		}
		for _, cs := range fp.Clusters {
			if cs.Phase != policyhubv1.ClusterPhaseSynced || cs.ObservedGeneration != fp.Generation {
				return fmt.Errorf("%s: %s at generation %d (%s), want Synced at %d", cs.Name, cs.Phase, cs.ObservedGeneration, cs.Message, fp.Generation)
			}
		}
		if len(fp.Clusters) != len(clusters) {
			return fmt.Errorf("%d clusters in the status, want %d", len(fp.Clusters), len(clusters))
		}
		return nil
	}
	waitFleetPolicy(t, policy, "synced by three replicas", syncedAt)

	// Catch replica-a holding cluster-2's sync Lease (its resync passes of midpass-0 take it every
	// second, and last seconds over the slow link) and SIGKILL it then.
	victim := e2eHubID + "/replica-a"
	var killed time.Time
	eventually(t, 60*time.Second, 20*time.Millisecond, "replica-a holding cluster-2's sync Lease", func() error {
		if h := holders.current(); h != victim {
			return fmt.Errorf("held by %q", h)
		}
		if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed = time.Now()
		return nil
	})
	_ = a.cmd.Wait()
	// The link is fast again: the handover is timed on the hub's own speed.
	slow.delay.Store(0)
	lease := syncLease(t, "cluster-2")
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != victim {
		t.Fatalf("after the kill cluster-2's sync Lease is held by %q, want the killed %q: the kill missed the pass", h, victim)
	}
	updateFleetPolicy(t, policy, func(fp *policyhubv1.FleetPolicy) { fp.Spec.Mode = ptr.To(policyhubv1.ModeEnforce) })
	eventually(t, 30*time.Second-time.Since(killed), 100*time.Millisecond, "cluster-2 (midpass-0) holds the change", func() error {
		live, err := liveObject(t, "cluster-2", clusterPolicyNamed(policy))
		if err != nil {
			return err
		}
		if action := ruleFailureAction(live); action != "Enforce" {
			return fmt.Errorf("failureAction %q", action)
		}
		return nil
	})
	handover := time.Since(killed)
	waitFleetPolicyWithin(t, 30*time.Second-time.Since(killed), policy, "every cluster Synced at the change", syncedAt)
	t.Logf("replica-a killed holding cluster-2's sync Lease: cluster-2 held the next change %s after the kill, every cluster's status Synced %s after",
		handover.Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond))

	// No double write: the first holder after the killed replica released its record first (the
	// conditional release), no two turns overlapped, and two contents were each written once.
	next, took, released := holders.firstAfter(victim, killed)
	switch {
	case next == "":
		t.Error("nobody took cluster-2's sync Lease after the kill")
	case !released:
		t.Errorf("%s took cluster-2's sync Lease from the killed replica without releasing it first", next)
	default:
		// Taken as soon as membership judged the victim dead (its replica Lease's last renewal +
		// LeaseDuration, on this machine's one clock), not a second Lease duration later.
		expired := replicaLeaseRenewed(t, "replica-a").Add(shard.LeaseDuration)
		t.Logf("%s took cluster-2's sync Lease %s after the kill, %s after replica-a's membership expired",
			next, took.Sub(killed).Round(100*time.Millisecond), took.Sub(expired).Round(100*time.Millisecond))
		if late := took.Sub(expired); late > shard.LeaseDuration/2 {
			t.Errorf("%s took cluster-2's sync Lease %s after replica-a's membership expired, want at once (under %s)", next, late.Round(100*time.Millisecond), shard.LeaseDuration/2)
		}
	}
	overlaps, _ := takeovers()
	for _, o := range overlaps {
		t.Errorf("two replicas' turns overlapped: %s", o)
	}
	live, err := liveObject(t, "cluster-2", clusterPolicyNamed(policy))
	if err != nil {
		t.Fatal(err)
	}
	if live.GetGeneration() != 2 {
		t.Errorf("cluster-2: the policy is at generation %d, want 2 (created, then Enforce: one write per change)", live.GetGeneration())
	}
	for _, r := range []*hubReplica{b, c} {
		stopHubProcess(t, r.cmd)
	}
	runHubProcess(t, binary, "single")
	deleteDeclaration(t, &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}})
}

// replicaLeaseRenewed is when a replica last renewed its replica Lease.
func replicaLeaseRenewed(t *testing.T, replica string) time.Time {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cs.CoordinationV1().Leases(e2eHubNamespace).Get(testContext(t), policyhubv1.ReplicaLeaseName(e2eHubID, replica), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.RenewTime == nil {
		t.Fatalf("replica %s's Lease was never renewed", replica)
	}
	return lease.Spec.RenewTime.Time
}

// syncLease reads a cluster's sync Lease directly in the cluster.
func syncLease(t *testing.T, cluster string) *coordinationv1.Lease {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fleetOf(t).Cluster(cluster).Config)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cs.CoordinationV1().Leases(work.LeaseNamespace).Get(testContext(t), work.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// holderWatch follows a cluster's sync Lease: its holder now, and every change of holder with
// when the watch delivered it.
type holderWatch struct {
	mu    sync.Mutex
	now   string
	turns []holderTurn
}

type holderTurn struct {
	holder string
	at     time.Time
}

func watchHolders(t *testing.T, ctx context.Context, cluster string) *holderWatch {
	t.Helper()
	w := watchSyncLease(t, ctx, cluster)
	h := &holderWatch{}
	go func() {
		for ev := range w.ResultChan() {
			lease, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			h.mu.Lock()
			if holder != h.now {
				h.turns = append(h.turns, holderTurn{holder, time.Now()})
			}
			h.now = holder
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *holderWatch) current() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// firstAfter is the first holder other than prev (and not the empty one) seen after since,
// when, and whether the Lease had been released (an empty holder) just before.
func (h *holderWatch) firstAfter(prev string, since time.Time) (holder string, at time.Time, released bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, turn := range h.turns {
		if turn.at.After(since) && turn.holder != "" && turn.holder != prev {
			return turn.holder, turn.at, i > 0 && h.turns[i-1].holder == ""
		}
	}
	return "", time.Time{}, false
}

// slowLink is a TCP relay to a cluster's apiserver that holds every chunk a client sends for
// delay before passing it on: a slow network, so that a pass through it lasts seconds. TLS
// passes through untouched (the apiserver's certificate names 127.0.0.1).
type slowLink struct {
	l     net.Listener
	delay atomic.Int64 // nanoseconds
}

func startSlowLink(t *testing.T, target string, delay time.Duration) *slowLink {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowLink{l: l}
	s.delay.Store(int64(delay))
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			go s.relay(in, u.Host)
		}
	}()
	return s
}

func (s *slowLink) relay(in net.Conn, target string) {
	defer in.Close()
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				time.Sleep(time.Duration(s.delay.Load())) // the slow network, not synchronisation
				if _, werr := out.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// URL is the link as a cluster endpoint.
func (s *slowLink) URL() string { return "https://" + s.l.Addr().String() }
