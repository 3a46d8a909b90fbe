package work

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/policyhub/policyhub/hub/plan"
)

func (s *Syncer) write(ctx context.Context, cc *clusterClients, w *workPlan, which []int, dryRun bool) {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	// In stages (writeStage): Gatekeeper's templates before their Constraints, pruned after them.
	for stage := range writeStages {
		s.eachChange(w, func(c *change) bool { return selected[c.decl] && c.action.writes() && writeStage(c) == stage }, func(c *change) {
			s.writeOne(ctx, cc, c, dryRun)
		})
	}
}

// eachChange runs do on the changes of w that pick selects, at most Concurrency at a time (they
// are requests to one cluster), and returns when all are done.
func (s *Syncer) eachChange(w *workPlan, pick func(*change) bool, do func(*change)) {
	sem := make(chan struct{}, s.opts.Concurrency)
	var wg sync.WaitGroup
	for _, c := range w.changes {
		if !pick(c) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			do(c)
		}()
	}
	wg.Wait()
}

func (s *Syncer) writeOne(ctx context.Context, cc *clusterClients, c *change, dryRun bool) {
	if c.action == ActionDelete {
		// Preconditions: never delete an object re-created, or changed since it was read (a
		// dry-run previews the delete of the object as read, whatever its version now).
		uid, version := c.live.GetUID(), c.live.GetResourceVersion()
		preconditions := client.Preconditions{UID: &uid, ResourceVersion: &version}
		if dryRun {
			preconditions.ResourceVersion = nil
		}
		deleteOpts := []client.DeleteOption{preconditions}
		if dryRun {
			deleteOpts = append(deleteOpts, client.DryRunAll)
		}
		c.err = client.IgnoreNotFound(cc.client.Delete(ctx, c.live.DeepCopy(), deleteOpts...))
		if dryRun && c.err == nil {
			c.diff = diff(c.live, nil)
		}
		if !dryRun && c.err == nil {
			cc.verified.forget(plan.KeyOf(c.live))
		}
		return
	}
	var applied *unstructured.Unstructured
	var err error
	if !dryRun {
		// The cluster's answer to the hub's own apply is what the hub would apply: verified.
		// The watch may bring the write before the answer: judged once it is recorded.
		key := plan.KeyOf(c.desired)
		cc.verified.writing(key)
		defer func() {
			var answer *unstructured.Unstructured
			if c.err == nil {
				answer = applied
			}
			if missed := cc.verified.writeDone(key, answer); missed != nil && s.opts.OnOwnedChange != nil {
				s.opts.OnOwnedChange(cc.name, missed, false, true)
			}
		}()
	}
	if dryRun && c.after != nil {
		applied = c.after // verify's dry-run apply asked the same question
	} else {
		applied, err = Apply(ctx, cc.client, c.desired, c.live, dryRun)
	}
	if err == nil {
		applied, err = restoreForeign(ctx, cc.client, c.desired, applied, dryRun)
	}
	c.err = err
	if err == nil && !dryRun && c.action == ActionUpdate && applied.GetUID() != "" && applied.GetUID() != c.live.GetUID() {
		// Deleted since the read (the cache lagged): the update created it anew. Say so.
		c.action = ActionCreate
	}
	if dryRun && c.err == nil {
		c.diff = diff(c.live, applied)
	}
}

// restoreFieldManager writes the restore of foreign fields (a JSON patch: an update, not an
// apply). What it sets is what policyhub's apply sets, so it never counts as foreign itself.
const restoreFieldManager = FieldManager + "-restore"

// restoreForeign takes out of applied (the apply's answer) the fields other managers own and
// policyhub's apply does not (see foreignPaths), on condition that the object is still as
// applied. A dry-run only shows it.
func restoreForeign(ctx context.Context, c client.Client, desired, applied *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	paths, err := foreignPaths(applied)
	if err != nil || len(paths) == 0 {
		return applied, err
	}
	if dryRun {
		return withoutForeign(desired, applied, paths), nil
	}
	patch, err := restorePatch(desired, applied, paths)
	if err != nil || patch == nil {
		return applied, err
	}
	restored := applied.DeepCopy()
	if err := c.Patch(ctx, restored, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(restoreFieldManager)); err != nil {
		return applied, fmt.Errorf("remove the fields other managers added to %s %s: %w", applied.GetKind(), applied.GetName(), err)
	}
	return restored, nil
}

// Apply server-side applies desired as policyhub, on condition that the object is still as it was
// read (live; nil when it was absent). A plan made from a watch cache that lagged the cluster is
// thus refused with a Conflict (apierrors.IsConflict) rather than applied over a state nobody
// checked:
//   - an update carries live's resourceVersion, and forces ownership: restoring fields edited in
//     the cluster is the point;
//   - a create does not force: should an object of that name have appeared since the read, the
//     fields its own managers set differently conflict instead of being taken over. (The API has
//     no create-only apply: one that appeared holding exactly the same values would be merged.)
//
// Dry-run applies are unconditional, as previews of the write. The object returned is the
// cluster's answer: the object as applied (or as it would be, for a dry-run). An update of an
// object deleted since the read creates it anew (an apply always may create, and a create takes
// no resourceVersion): the object returned then has another UID than live.
func Apply(ctx context.Context, c client.Client, desired, live *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	applied := desired.DeepCopy()
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	switch {
	case dryRun:
		opts = append(opts, client.ForceOwnership, client.DryRunAll)
	case live != nil:
		applied.SetResourceVersion(live.GetResourceVersion())
		opts = append(opts, client.ForceOwnership)
	}
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), opts...)
	return applied, err
}
