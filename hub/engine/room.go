package engine

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/rollout"
	"github.com/policyhub/policyhub/hub/work"
)

// Room is a reconciler's memory of its declarations between the two halves of the flow.
// The dispatch half leaves there what it rendered, so that the status half, woken by the
// workers' results and the agents' summaries many times more often than anything a rendering
// depends on changes, reads it instead of placing and rendering again. The results are recorded
// there per cluster: the newest one already announced (a result is announced once however often
// the declaration is reconciled), and when the current wanted state was first asked for and
// first answered (to coalesce status writes). The zero value is ready to use.
type Room struct {
	mu   sync.Mutex
	last map[types.NamespacedName]*roomEntry
}

type roomEntry struct {
	// epoch counts the events that may change a rendering (inventory, placements, grants, the
	// application); a rendering is good only for the epoch it was made in.
	epoch    uint64
	rendered *Rendering

	token      string
	wantedAt   time.Time
	answeredAt time.Time
	seq        map[string]uint64
}

// Rendering is what the dispatch half made of a declaration: where it goes and what each
// cluster gets (targets), the rollout plan that chose the versions, and the token naming that
// wanted state for the workers.
type Rendering struct {
	// input names what the rendering was made from that is read from the declaration itself
	// (see engine.renderInput); what is read from elsewhere moves epoch.
	input   string
	epoch   uint64
	Targets *render.Targets
	Rollout *rollout.Plan
	token   string
	// Detail is what the kind made besides its targets and rollout (a set's members, what an
	// exception exempts from): kept with the rendering, and handed back to the kind's Progress.
	Detail any
}

// entry returns key's entry, made on first use; r.mu must be held.
func (r *Room) entry(key types.NamespacedName) *roomEntry {
	if r.last == nil {
		r.last = map[types.NamespacedName]*roomEntry{}
	}
	e := r.last[key]
	if e == nil {
		e = &roomEntry{seq: map[string]uint64{}}
		r.last[key] = e
	}
	return e
}

// rendered returns key's last rendering when it was made from input and no event since may have
// changed it; otherwise nil, and the epoch a new rendering, made from what is read after this
// call, is to be kept under.
func (r *Room) rendered(key types.NamespacedName, input string) (*Rendering, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key)
	if e.rendered != nil && e.rendered.epoch == e.epoch && e.rendered.input == input {
		return e.rendered, e.epoch
	}
	return nil, e.epoch
}

// keep records a rendering made in its epoch; one made before a later event is never used.
func (r *Room) keep(key types.NamespacedName, made *Rendering) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry(key).rendered = made
}

// rerender says that what key's rendering was made from may have changed.
func (r *Room) rerender(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry(key).epoch++
}

// Rerendering wraps an event map of something a rendering is made from (the inventory, an OCM
// placement, a grant, an application): the declarations it maps to render again before they
// dispatch. It marks them before they are queued, so a reconcile that starts after the event
// never uses a rendering made before it.
func (r *Room) Rerendering(mapFn handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		reqs := mapFn(ctx, obj)
		for _, req := range reqs {
			r.rerender(req.NamespacedName)
		}
		return reqs
	}
}

// since returns when the declaration first wanted token (now, if it is new) and when a cluster
// first answered for it (zero until answered is true in a call).
func (r *Room) since(key types.NamespacedName, token string, answered bool, now time.Time) (wantedAt, answeredAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key)
	if e.token != token {
		e.token, e.wantedAt, e.answeredAt = token, now, time.Time{}
	}
	if answered && e.answeredAt.IsZero() {
		e.answeredAt = now
	}
	return e.wantedAt, e.answeredAt
}

// fresh marks the outcomes already announced as not written (their write was announced), and
// records the rest as announced.
func (r *Room) fresh(key types.NamespacedName, outcomes []Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.last[key]
	if e == nil {
		return
	}
	for i := range outcomes {
		o := &outcomes[i]
		if o.Pending {
			continue
		}
		if o.Seq <= e.seq[o.Cluster] {
			o.Wrote = false
		}
		e.seq[o.Cluster] = max(e.seq[o.Cluster], o.Seq)
	}
}

// Forget drops everything about key (the declaration is gone).
func (r *Room) Forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
}

// Outcome is what one reconcile learnt about one cluster.
type Outcome struct {
	Cluster string
	Result  *work.DeclarationResult
	// Wrote is true when the sync changed something in the cluster (and was not announced yet).
	Wrote bool
	// WroteAt is when the worker last wrote the wanted state (zero: not since it started).
	WroteAt time.Time
	// Pending is true while the cluster's worker has no result for the wanted state.
	Pending bool
	// Seq orders the worker's results (see work.Result).
	Seq uint64
}
