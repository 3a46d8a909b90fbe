package e2e

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/agent/push"
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// The agent keeps to the pacing the hub publishes in its summary's status, read back from its
// own writes' responses on a real kube-apiserver: the test publishes one itself (the hub's
// summary controller may overwrite it with its own: either way, the agent must hold what the
// status says once read back), and the agent's next write teaches it; the Lease's next renewal
// then lasts three of the published heartbeat.
func TestAgentLearnsPublishedPacing(t *testing.T) {
	ctx := testContext(t)
	const cluster = "push-pacing-1"
	const interval, heartbeat = 200 * time.Millisecond, 2 * time.Second
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, cluster)

	src := &summarySource{}
	src.set("v1", 10)
	p := startPusher(t, hub, push.Options{Cluster: cluster, Interval: interval, Heartbeat: heartbeat}, src)
	waitSummary(ctx, t, hub, cluster, "v1", 10, 30*time.Second)

	// Published as a hub would: longer than the agent's own intervals, so learning it shows.
	summary := &policyhubv1.PolicyReportSummary{}
	summary.Namespace, summary.Name = cluster, push.SummaryName
	published := `{"status":{"pacing":{"pushInterval":"20s","heartbeatInterval":"1m0s","clusters":7}}}`
	if err := hub.Status().Patch(ctx, summary, client.RawPatch(types.MergePatchType, []byte(published))); err != nil {
		t.Fatalf("publish the pacing in the summary's status: %v", err)
	}

	// A fail count changing is urgent: pushed at the agent's Interval whatever the share, and
	// its response carries the status. Each round changes it again, until the pace the agent
	// holds is what the status says, read back after the write.
	fail := int64(1)
	var learnedBeat time.Duration
	eventually(t, 2*time.Minute, 500*time.Millisecond, "the agent keeps to the pacing its summary's status publishes", func() error {
		fail++
		pushes := p.Pushes()
		setFail(src, fmt.Sprintf("fail-%d", fail), fail)
		p.signal()
		deadline := time.Now().Add(30 * time.Second)
		for p.Pushes() == pushes {
			if time.Now().After(deadline) {
				return fmt.Errorf("the urgent change (fail %d) was not pushed within 30s", fail)
			}
			time.Sleep(20 * time.Millisecond) // polling Pushes(), bounded by deadline
		}
		s, err := hubSummary(ctx, hub, cluster)
		if err != nil {
			return err
		}
		if s.Status.Pacing == nil {
			return fmt.Errorf("the summary's status has no pacing (the test published one)")
		}
		wantPush := max(interval, min(max(s.Status.Pacing.PushInterval.Duration, policyhubv1.MinPushInterval), policyhubv1.MaxPacingInterval))
		wantBeat := max(heartbeat, min(max(s.Status.Pacing.HeartbeatInterval.Duration, policyhubv1.MinHeartbeatInterval), policyhubv1.MaxPacingInterval))
		gotPush, gotBeat := p.Pace()
		if gotPush != wantPush || gotBeat != wantBeat {
			return fmt.Errorf("the agent keeps pushInterval %s, heartbeat %s; the status publishes %s, %s (want %s, %s)",
				gotPush, gotBeat, s.Status.Pacing.PushInterval.Duration, s.Status.Pacing.HeartbeatInterval.Duration, wantPush, wantBeat)
		}
		learnedBeat = gotBeat
		return nil
	})
	if learnedBeat == heartbeat {
		t.Fatalf("the agent keeps its own heartbeat %s: nothing was learned", heartbeat)
	}

	// The next renewal comes a published heartbeat after the last, and applies the whole Lease
	// to last three of it.
	renewals := p.Renewals()
	eventually(t, learnedBeat+30*time.Second, 200*time.Millisecond, "the Lease lasts three published heartbeats", func() error {
		if p.Renewals() == renewals {
			return fmt.Errorf("no renewal yet since the pace changed")
		}
		lease := &coordinationv1.Lease{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: push.LeaseName}, lease); err != nil {
			return err
		}
		want := int32(3 * learnedBeat / time.Second)
		if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != want {
			return fmt.Errorf("leaseDurationSeconds %v, want %d (three of %s)", d, want, learnedBeat)
		}
		return nil
	})
	p.running(t)
}

// setFail makes src's content carry fail results, under hash.
func setFail(src *summarySource, hash string, fail int64) {
	src.mu.Lock()
	defer src.mu.Unlock()
	src.spec = policyhubv1.PolicyReportSummarySpec{ContentHash: hash, Totals: policyhubv1.ResultCounts{Pass: 10, Fail: fail}}
}

// A summary write's response is the whole object, status included: the apply that creates or
// takes back the summary and the patch after it each return the pacing the status holds, as does
// the read of it from the apiserver's cache, on a real kube-apiserver.
func TestSummaryWritesReturnPublishedPacing(t *testing.T) {
	ctx := testContext(t)
	const cluster = "push-pacing-2"
	hub := directClient(t, fleetOf(t).Hub.Config)
	createNamespace(ctx, t, hub, cluster)
	o := push.Options{Cluster: cluster, Interval: 200 * time.Millisecond, Heartbeat: 2 * time.Second}
	spec := func(n int64) policyhubv1.PolicyReportSummarySpec {
		return policyhubv1.PolicyReportSummarySpec{ContentHash: fmt.Sprintf("w-%d", n), Totals: policyhubv1.ResultCounts{Pass: n}}
	}
	first, err := push.NewAPIWrites(hub, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Summary(ctx, spec(1), time.Now()); err != nil {
		t.Fatalf("create the summary: %v", err)
	}
	summary := &policyhubv1.PolicyReportSummary{}
	summary.Namespace, summary.Name = cluster, push.SummaryName
	published := `{"status":{"pacing":{"pushInterval":"40s","heartbeatInterval":"2m0s","clusters":9}}}`
	if err := hub.Status().Patch(ctx, summary, client.RawPatch(types.MergePatchType, []byte(published))); err != nil {
		t.Fatalf("publish the pacing in the summary's status: %v", err)
	}

	// Each round: a new agent's first write (an apply), its second (a patch), and a read; each
	// must return what the status holds when read back right after.
	n := int64(1)
	eventually(t, time.Minute, 500*time.Millisecond, "every write's response and the read return the status's pacing", func() error {
		w, err := push.NewAPIWrites(hub, o)
		if err != nil {
			return err
		}
		var got []push.PacingRead
		for range 2 {
			n++
			read, err := w.Summary(ctx, spec(n), time.Now())
			if err != nil {
				return err
			}
			got = append(got, read)
		}
		read, found, err := w.Pacing(ctx)
		if err != nil || !found {
			return fmt.Errorf("read the pacing: found %t, %v", found, err)
		}
		got = append(got, read)
		s, err := hubSummary(ctx, hub, cluster)
		if err != nil {
			return err
		}
		if s.Status.Pacing == nil {
			return fmt.Errorf("the summary's status has no pacing (the test published one)")
		}
		for i, what := range []string{"the apply's response", "the patch's response", "the read"} {
			if got[i].Unreadable != "" || got[i].Pacing == nil || *got[i].Pacing != *s.Status.Pacing {
				return fmt.Errorf("%s: %+v, the status holds %+v", what, got[i], *s.Status.Pacing)
			}
		}
		return nil
	})
}
