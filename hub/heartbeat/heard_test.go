package heartbeat

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func lease(namespace, name, resourceVersion string, renewed time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: resourceVersion}}
	if !renewed.IsZero() {
		l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	}
	return l
}

// queued drains q and returns what was in it.
func queued(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []reconcile.Request {
	var out []reconcile.Request
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		out = append(out, r)
	}
	return out
}

func TestHandlerRecordsRenewalsByHubTime(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	h := New(func() time.Time { return now })
	handler := h.Handler()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx := context.Background()
	summary := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "c1", Name: policyhubv1.SummaryName}}
	name := policyhubv1.AgentLeaseName

	// Found when the hub lists it: the agent's time stands in, but never later than the hub's now.
	handler.Create(ctx, event.CreateEvent{Object: lease("c1", name, "1", now.Add(time.Hour))}, q)
	if got := h.At("c1"); !got.Equal(now) {
		t.Errorf("a renewTime an hour ahead: heard at %v, want the hub's now %v", got, now)
	}
	if got := queued(q); len(got) != 1 || got[0] != summary {
		t.Errorf("queued %v, want the cluster's summary", got)
	}
	handler.Create(ctx, event.CreateEvent{Object: lease("c2", name, "1", now.Add(-time.Hour))}, q)
	if got := h.At("c2"); !got.Equal(now.Add(-time.Hour)) {
		t.Errorf("a Lease renewed an hour ago: heard at %v", got)
	}
	queued(q)

	// A renewal is timed by the hub, whatever the agent wrote in renewTime.
	now = now.Add(time.Minute)
	handler.Update(ctx, event.UpdateEvent{ObjectOld: lease("c2", name, "1", now.Add(-time.Hour)), ObjectNew: lease("c2", name, "2", now.Add(-24*time.Hour))}, q)
	if got := h.At("c2"); !got.Equal(now) {
		t.Errorf("renewed: heard at %v, want %v", got, now)
	}
	if got := queued(q); len(got) != 1 || got[0].Namespace != "c2" {
		t.Errorf("queued %v, want c2's summary", got)
	}

	// A resync (same resourceVersion) is not a renewal, and queues nothing.
	later := now.Add(time.Minute)
	h.now = func() time.Time { return later }
	handler.Update(ctx, event.UpdateEvent{ObjectOld: lease("c2", name, "2", now), ObjectNew: lease("c2", name, "2", now)}, q)
	if got := h.At("c2"); !got.Equal(now) {
		t.Errorf("a resync moved the time heard to %v", got)
	}
	if got := queued(q); len(got) != 0 {
		t.Errorf("a resync queued %v", got)
	}

	// Another Lease in the namespace speaks for nothing.
	handler.Update(ctx, event.UpdateEvent{ObjectOld: lease("c2", "other", "1", now), ObjectNew: lease("c2", "other", "9", now)}, q)
	handler.Create(ctx, event.CreateEvent{Object: lease("c3", "other", "1", now)}, q)
	if got := h.At("c3"); !got.IsZero() || !h.At("c2").Equal(now) {
		t.Errorf("another Lease counted: c3 heard at %v, c2 at %v", got, h.At("c2"))
	}
	if got := queued(q); len(got) != 0 {
		t.Errorf("another Lease queued %v", got)
	}

	// Deleted: forgotten, and the summary is looked at again.
	handler.Delete(ctx, event.DeleteEvent{Object: lease("c2", name, "2", now)}, q)
	if got := h.At("c2"); !got.IsZero() {
		t.Errorf("deleted Lease still heard at %v", got)
	}
	if got := queued(q); len(got) != 1 || got[0].Namespace != "c2" {
		t.Errorf("queued %v, want c2's summary", got)
	}
}

// Found never moves what the hub heard backwards: a stale list after a renewal the hub timed
// itself keeps the later time.
func TestFoundKeepsTheLaterTime(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	h := New(func() time.Time { return now })
	h.Renewed("c1")
	h.Found("c1", now.Add(-time.Minute))
	if got := h.At("c1"); !got.Equal(now) {
		t.Errorf("heard at %v, want %v", got, now)
	}
	var none *Heard
	if !none.At("c1").IsZero() {
		t.Error("a nil record heard something")
	}
}
