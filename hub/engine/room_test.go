package engine

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A rendering is reused only while what it was made from holds: the declaration's own input, and
// no event of the inventory, a placement, a grant or an application since it was read.
func TestResultsRoomReusesARenderingUntilItsInputsMove(t *testing.T) {
	key := types.NamespacedName{Name: "fp"}
	other := types.NamespacedName{Name: "other"}
	var room Room
	inventoryEvent := room.Rerendering(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})

	if r, _ := room.rendered(key, "gen 1"); r != nil {
		t.Fatal("a rendering before any was made")
	}
	_, epoch := room.rendered(key, "gen 1")
	room.keep(key, &Rendering{input: "gen 1", epoch: epoch, token: "t1"})
	if r, _ := room.rendered(key, "gen 1"); r == nil || r.token != "t1" {
		t.Fatalf("the same input: got %+v, want the kept rendering", r)
	}
	if r, _ := room.rendered(key, "gen 2"); r != nil {
		t.Fatal("a new generation reused the old rendering")
	}

	if reqs := inventoryEvent(context.Background(), nil); len(reqs) != 1 || reqs[0].NamespacedName != key {
		t.Fatalf("the wrapped map changed its requests: %v", reqs)
	}
	if r, _ := room.rendered(key, "gen 1"); r != nil {
		t.Fatal("an inventory event did not renew the rendering")
	}

	// Made from a read before an event that came while it was rendered: never used.
	_, epoch = room.rendered(key, "gen 1")
	inventoryEvent(context.Background(), nil)
	room.keep(key, &Rendering{input: "gen 1", epoch: epoch, token: "t2"})
	if r, _ := room.rendered(key, "gen 1"); r != nil {
		t.Fatal("a rendering made before the last event was reused")
	}

	// Another declaration's rendering is its own.
	_, epoch = room.rendered(other, "gen 1")
	room.keep(other, &Rendering{input: "gen 1", epoch: epoch})
	inventoryEvent(context.Background(), nil)
	if r, _ := room.rendered(other, "gen 1"); r == nil {
		t.Fatal("an event of another declaration renewed this one's rendering")
	}
	room.Forget(other)
	if r, _ := room.rendered(other, "gen 1"); r != nil {
		t.Fatal("a forgotten declaration's rendering was kept")
	}
}
