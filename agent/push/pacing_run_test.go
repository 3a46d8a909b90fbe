package push

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// These run a Pusher in virtual time against a hub that publishes pacing (writeLog.publish):
// the share of a thousand-cluster fleet, pushes every 160s, is kept.

const testShare = 160 * time.Second

// landed is every summary that landed, in order.
func (l *writeLog) landedSummaries() []landedSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]landedSummary(nil), l.summaries...)
}

func (l *writeLog) renewalBeats() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.beats...)
}

func (l *writeLog) reads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pacingReads
}

// Pass-only churn every 10s (Kyverno's background scans) is pushed once a share, never sooner,
// and nothing is lost: the last push carries the last change.
func TestPassOnlyChurnKeepsTheShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		hub.publish(testShare, time.Minute)
		r := start(t, hub, defaultOptions())
		if got, _ := r.Pace(); got != testShare {
			t.Fatalf("push interval %s after the start push, want the published %s", got, testShare)
		}
		const churn = 20 * time.Minute
		for i := 1; i <= int(churn/testInterval); i++ {
			r.src.set(fmt.Sprintf("pass-%d", i))
			r.signal()
			advance(testInterval)
		}
		last := fmt.Sprintf("pass-%d", int(churn/testInterval))
		advance(testShare) // the last change is deferred, not dropped
		landed := hub.landedSummaries()
		for i := 1; i < len(landed); i++ {
			if gap := landed[i].at.Sub(landed[i-1].at); gap < testShare {
				t.Errorf("push %d came %s after the one before, within the share %s", i, gap, testShare)
			}
		}
		// 1 at start, then one a share: 20m / 160s = 7.5, plus the last one after the churn.
		if n := len(landed); n > 1+int(churn/testShare)+1 || n < int(churn/testShare) {
			t.Errorf("%d pushes in %s of churn, want about one every %s", n, churn, testShare)
		}
		if got := landed[len(landed)-1].spec.ContentHash; got != last {
			t.Errorf("the hub holds %q, want the last change %q", got, last)
		}
		if r.src.builds < int(churn/testInterval) {
			t.Errorf("%d builds: the changes were not each looked at for urgency", r.src.builds)
		}
		r.stop(t)
	})
}

// A fail count changing every 10s is pushed within Interval while the reserve lasts (the start
// push spends one of it), then once a share, each push carrying the latest count.
func TestFailChangesGoAheadWhileTheReserveLasts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		hub.publish(testShare, time.Minute)
		started := time.Now()
		r := start(t, hub, defaultOptions())
		for i := 1; i <= 60; i++ { // 10 minutes
			r.src.setFail(int64(i))
			r.signal()
			advance(testInterval)
			landed := hub.landedSummaries()
			if i < policyhubv1.UrgentPushes && len(landed) != 1+i {
				t.Fatalf("fail change %d: %d pushes, want %d (pushed at Interval from the reserve)", i, len(landed), 1+i)
			}
			if got := landed[len(landed)-1].spec.Totals.Fail; len(landed) == 1+i && got != int64(i) {
				t.Errorf("push after fail change %d carries fail %d", i, got)
			}
		}
		landed := hub.landedSummaries()
		// Once spent, one is refilled a share after the reserve's clock started (the start push):
		// pushes at 160s, 320s, 480s after it.
		var afterBurst []time.Duration
		for _, l := range landed[policyhubv1.UrgentPushes:] {
			afterBurst = append(afterBurst, l.at.Sub(started))
		}
		want := []time.Duration{testShare, 2 * testShare, 3 * testShare}
		if fmt.Sprint(afterBurst) != fmt.Sprint(want) {
			t.Errorf("pushes after the reserve was spent at %v, want %v (one a share)", afterBurst, want)
		}
		r.stop(t)
	})
}

// A quiet agent (it never pushes after start) learns a longer heartbeat from its read of the
// summary every tenth renewal, then renews at it, passing the new beat (the whole Lease is
// applied again with three of it), and announces it with its next push.
func TestPublishedHeartbeatSlowsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		r := start(t, hub, defaultOptions())
		if _, beat := r.Pace(); beat != testHeartbeat {
			t.Fatalf("heartbeat %s with nothing published, want the flag's %s", beat, testHeartbeat)
		}
		const published = 4 * time.Minute
		hub.publish(policyhubv1.MinPushInterval, published)
		advance(readPacingEvery * testHeartbeat)
		if _, beat := r.Pace(); beat != published {
			t.Fatalf("heartbeat %s after %d renewals, want the published %s (read every %d)", beat, r.Renewals(), published, readPacingEvery)
		}
		if reads := hub.reads(); reads != 2 {
			t.Errorf("%d reads of the pacing in %d renewals, want 2 (at start and the tenth)", reads, r.Renewals())
		}
		before := r.Renewals()
		advance(5 * published)
		if got := r.Renewals() - before; got != 5 {
			t.Errorf("%d renewals in five published heartbeats, want 5", got)
		}
		beats := hub.renewalBeats()
		if beats[0] != testHeartbeat || beats[len(beats)-1] != published {
			t.Errorf("renewal beats %v, want %s first and %s last", beats, testHeartbeat, published)
		}
		if n := r.logs.Count("the agent's pace changed"); n != 1 {
			t.Errorf("the change of pace was logged %d times, want once", n)
		}
		r.src.set("v2")
		r.signal()
		advance(testInterval)
		if s, _ := hub.summary(t); s.HeartbeatInterval == nil || s.HeartbeatInterval.Duration != published {
			t.Errorf("the next push announces heartbeat %v, want %s", s.HeartbeatInterval, published)
		}
		r.stop(t)
	})
}

// The hub's pacing is hostile until checked: out of bounds, it is clamped and said once; gone
// (an older hub), the agent's own flags again.
func TestPublishedPacingBoundedAndDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		hub.publish(time.Millisecond, 1000*time.Hour)
		r := start(t, hub, defaultOptions())
		push, beat := r.Pace()
		if push != policyhubv1.MinPushInterval || beat != policyhubv1.MaxPacingInterval {
			t.Errorf("pace %s, %s from an out-of-bounds pacing; want %s, %s", push, beat, policyhubv1.MinPushInterval, policyhubv1.MaxPacingInterval)
		}
		for i := range 3 {
			r.src.set(fmt.Sprintf("v%d", i+2))
			r.signal()
			advance(testInterval)
		}
		if n := r.logs.Count("out of bounds"); n != 1 {
			t.Errorf("the out-of-bounds pacing was logged %d times, want once", n)
		}
		hub.mu.Lock()
		hub.pacing = nil
		hub.mu.Unlock()
		r.src.set("v9")
		r.signal()
		advance(testInterval)
		if push, beat := r.Pace(); push != testInterval || beat != testHeartbeat {
			t.Errorf("pace %s, %s once the hub publishes none; want the flags %s, %s", push, beat, testInterval, testHeartbeat)
		}
		r.stop(t)
	})
}

// A pass-only change deferred to the share is pushed with an urgent change that comes after it,
// at Interval, not a share later: the push carries the latest build, both changes in it.
func TestUrgentChangeCarriesADeferredOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := newWriteLog()
		hub.publish(testShare, time.Minute)
		r := start(t, hub, defaultOptions())
		advance(5 * time.Second)
		r.src.set("pass-only")
		r.signal()
		advance(25 * time.Second)
		if r.Pushes() != 1 {
			t.Fatalf("%d pushes 30s in: the pass-only change was not deferred", r.Pushes())
		}
		r.src.setFail(3)
		r.signal()
		synctest.Wait()
		if r.Pushes() != 2 {
			t.Fatalf("%d pushes right after an urgent change, Interval after the last push: want 2", r.Pushes())
		}
		if s, _ := hub.summary(t); s.Totals.Fail != 3 {
			t.Errorf("the push carries fail %d, want 3 (the latest build)", s.Totals.Fail)
		}
		advance(testShare)
		if r.Pushes() != 2 {
			t.Errorf("%d pushes a share later with nothing new, want 2: the deferred change went with the urgent one", r.Pushes())
		}
		r.stop(t)
	})
}
