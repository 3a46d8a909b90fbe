package work

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// change is one object's planned action in a sync.
type change struct {
	decl    int
	action  Action
	desired *unstructured.Unstructured
	live    *unstructured.Unstructured
	message string
	diff    string
	err     error
	// after is the answer of verify's dry-run apply, when it found drift: what the write leaves.
	after *unstructured.Unstructured
}

type workPlan struct {
	changes []*change
	// live is what the plan was made from, by kind.
	live map[schema.GroupKind][]*unstructured.Unstructured
}

// kindsWritten are the kinds the declarations of indexes which would create, update, delete or
// find in conflict.
func (w *workPlan) kindsWritten(which []int) map[schema.GroupKind]bool {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	kinds := map[schema.GroupKind]bool{}
	for _, c := range w.changes {
		if !selected[c.decl] || c.action == ActionUnchanged {
			continue
		}
		obj := c.desired
		if obj == nil {
			obj = c.live
		}
		kinds[obj.GroupVersionKind().GroupKind()] = true
	}
	return kinds
}

// replace swaps the changes of the declarations of indexes which for other's (a fresher plan of
// them) and takes other's reads of the kinds it read.
func (w *workPlan) replace(which []int, other *workPlan) {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	kept := w.changes[:0]
	for _, c := range w.changes {
		if !selected[c.decl] {
			kept = append(kept, c)
		}
	}
	w.changes = append(kept, other.changes...)
	for gk, objs := range other.live {
		w.live[gk] = objs
	}
}

// refused lists the declarations of indexes which with a write the cluster refused as a conflict:
// the object changed since it was read, or a create met an object another manager owns.
func (w *workPlan) refused(which []int) []int {
	selected := map[int]bool{}
	for _, i := range which {
		selected[i] = true
	}
	var out []int
	for _, c := range w.changes {
		if selected[c.decl] && apierrors.IsConflict(c.err) {
			out = append(out, c.decl)
			delete(selected, c.decl)
		}
	}
	sort.Ints(out)
	return out
}

func (w *workPlan) needsWrite(decl int) bool {
	for _, c := range w.changes {
		if c.decl == decl && c.action.writes() {
			return true
		}
	}
	return false
}

// plan reads the cluster's policies (from the watch cache when cached) and plans the declarations
// of indexes which. With only set, just those kinds are read again and the others are taken from
// previous.
func (s *Syncer) plan(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, only map[schema.GroupKind]bool, previous map[schema.GroupKind][]*unstructured.Unstructured, cached bool) (*workPlan, error) {
	byKind, err := s.readLive(ctx, cc, decls, which, only, cached)
	if err != nil {
		return nil, err
	}
	if !cached {
		if err := s.upgradeFromPrevious(ctx, cc, byKind, previous); err != nil {
			return nil, err
		}
	}
	for gk, objs := range previous {
		if _, reread := byKind[gk]; !reread && !only[gk] {
			byKind[gk] = objs
		}
	}
	var live []*unstructured.Unstructured
	for _, objs := range byKind {
		live = append(live, objs...)
	}
	index := plan.NewLive(s.opts.HubID, live)
	w := &workPlan{live: byKind}
	// Two declarations rendering the same object: the first (by source) keeps it, the other is a Conflict.
	claimed := map[plan.Key]string{}
	order := append([]int(nil), which...)
	sort.Slice(order, func(a, b int) bool { return decls[order[a]].Source < decls[order[b]].Source })
	for _, i := range order {
		d := decls[i]
		p := index.Make(d.Source, d.Objects, d.Prune)
		for _, obj := range p.Apply {
			key := plan.KeyOf(obj)
			if other, taken := claimed[key]; taken {
				w.changes = append(w.changes, &change{decl: i, action: ActionConflict, desired: obj,
					message: fmt.Sprintf("%s is also rendered by %s, which keeps it; it is left untouched", key, other)})
				continue
			}
			claimed[key] = d.Source
			c := &change{decl: i, desired: obj, live: index.Get(key)}
			switch {
			case c.live == nil:
				c.action = ActionCreate
			case inSync(obj, c.live):
				c.action = ActionUnchanged
			default:
				c.action = ActionUpdate
			}
			w.changes = append(w.changes, c)
		}
		for _, conflict := range p.Conflicts {
			w.changes = append(w.changes, &change{decl: i, action: ActionConflict, desired: conflict.Desired, live: index.Get(plan.KeyOf(conflict.Desired)), message: conflict.Reason})
		}
		for _, obj := range p.Delete {
			if d.holdLegacy && policyhubv1.IsLegacyKind(obj.GroupVersionKind().GroupKind()) {
				continue // held: no longer rendered here, not pruned (see withoutLegacy)
			}
			w.changes = append(w.changes, &change{decl: i, action: ActionDelete, live: obj})
		}
	}
	// What looks unchanged from here may still hold fields added under policyhub's own name.
	s.verify(ctx, cc, w)
	return w, nil
}

// readLive lists, per served policy kind, the objects the declarations may touch: every object of
// the kinds they render (to find same-named objects policyhub does not own), and this hub's
// objects of the other kinds (to prune). With only set, just those kinds are listed. The lists
// run in parallel.
func (s *Syncer) readLive(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, only map[schema.GroupKind]bool, cached bool) (map[schema.GroupKind][]*unstructured.Unstructured, error) {
	if flooded, err := s.stillFlooded(ctx, cc); flooded || err != nil {
		if err != nil {
			return nil, err
		}
		return s.readDirect(ctx, cc, decls, which, only)
	}
	rendered := map[schema.GroupKind]schema.GroupVersionKind{}
	for _, i := range which {
		for _, obj := range decls[i].Objects {
			rendered[obj.GroupVersionKind().GroupKind()] = obj.GroupVersionKind()
		}
	}
	kinds := map[schema.GroupKind]bool{} // kind → list every object (not only ours)
	for gk := range rendered {
		kinds[gk] = true
	}
	// Objects of the kinds not rendered now matter only if they are ours (to prune). The watch
	// cache holds only what this hub owns, and only of the kinds it may have written here.
	var others []schema.GroupKind
	var err error
	if cached {
		others, err = s.ownedKinds(ctx, cc, rendered)
	} else {
		others, err = surveyKinds(cc)
	}
	if errors.Is(err, errFlooded) {
		return s.readDirect(ctx, cc, decls, which, only)
	}
	if err != nil {
		return nil, err
	}
	for _, gk := range others {
		if _, ok := kinds[gk]; !ok {
			kinds[gk] = false
		}
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		out   = map[schema.GroupKind][]*unstructured.Unstructured{}
		sem   = make(chan struct{}, s.opts.Concurrency)
	)
	for gk, all := range kinds {
		if only != nil && !only[gk] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Cached reads cost no request (the first one fills the kind's cache, and all kinds
			// fill at once); direct lists are bounded like any request.
			if !cached {
				sem <- struct{}{}
				defer func() { <-sem }()
			}
			objs, err := s.listKind(ctx, cc, gk, rendered, all, cached)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if objs != nil {
				out[gk] = objs
			}
		}()
	}
	wg.Wait()
	if first != nil || !cached {
		return out, first
	}
	if s.checkOwnedCount(ctx, cc, out) {
		return s.readDirect(ctx, cc, decls, which, only)
	}
	if err := s.addUnowned(ctx, cc, decls, which, rendered, out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkOwnedCount says whether a cached read holds more of this hub's objects than the cache may
// keep: the cluster is then flooded (see flood), its cache dropped.
func (s *Syncer) checkOwnedCount(ctx context.Context, cc *clusterClients, byKind map[schema.GroupKind][]*unstructured.Unstructured) bool {
	n := 0
	for _, objs := range byKind {
		for _, obj := range objs {
			if policyhubv1.OwnedBy(obj, s.opts.HubID) {
				n++
			}
		}
	}
	if n <= s.opts.MaxOwnedObjects {
		return false
	}
	s.flooded(ctx, cc, n)
	return true
}

// errFlooded says the cluster was found flooded (see flood).
var errFlooded = errors.New("flooded with objects labelled as this hub's")

// ownedKinds are the policy kinds that may hold this hub's objects in the cluster besides the
// rendered ones: those rendered there before by this process, and those found holding its
// objects by one survey of every served kind (metadata, label-selected, page by page) when the
// process first meets the cluster. Only these kinds are watched. A survey that finds more than
// the cache may keep finds the cluster flooded (errFlooded) before any cache holds them.
func (s *Syncer) ownedKinds(ctx context.Context, cc *clusterClients, rendered map[schema.GroupKind]schema.GroupVersionKind) ([]schema.GroupKind, error) {
	cc.kindsMu.Lock()
	defer cc.kindsMu.Unlock()
	if cc.kinds == nil {
		n, found, err := s.countOwned(ctx, cc, s.opts.MaxOwnedObjects)
		if err != nil {
			return nil, fmt.Errorf("survey the cluster's policies of this hub: %w", err)
		}
		if n > s.opts.MaxOwnedObjects {
			s.flooded(ctx, cc, n)
			return nil, errFlooded
		}
		cc.kinds = found
	}
	for gk := range rendered {
		cc.kinds[gk] = true
	}
	out := make([]schema.GroupKind, 0, len(cc.kinds))
	for gk := range cc.kinds {
		out = append(out, gk)
	}
	return out, nil
}

// surveyKinds are the kinds that may hold this hub's objects in the cluster: PolicyKinds, and
// every other kind the cluster serves in PolicyGroups (a fixed list alone would orphan an owned
// object of a kind it lacks after a restart).
func surveyKinds(cc *clusterClients) ([]schema.GroupKind, error) {
	out := slices.Clone(PolicyKinds)
	if cc.mapper == nil {
		return out, nil
	}
	for _, group := range PolicyGroups {
		served, err := cc.mapper.Kinds(group)
		if err != nil {
			return nil, fmt.Errorf("discover the kinds of %s: %w", group, err)
		}
		for _, gk := range served {
			if !slices.Contains(out, gk) {
				out = append(out, gk)
			}
		}
	}
	return out, nil
}

// addUnowned adds to a cached read the objects of the rendered kinds that this hub does not own
// but that carry the name of an object it would create: the watch cache holds only this hub's
// objects, and creating over one of them would touch an object that is not ours. They come from
// the cluster's name cache, whose watch of a kind starts at the first pass that creates one.
func (s *Syncer) addUnowned(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, rendered map[schema.GroupKind]schema.GroupVersionKind, byKind map[schema.GroupKind][]*unstructured.Unstructured) error {
	have := map[plan.Key]bool{}
	for _, objs := range byKind {
		for _, obj := range objs {
			have[plan.KeyOf(obj)] = true
		}
	}
	missing := map[schema.GroupKind]map[plan.Key]bool{}
	for _, i := range which {
		for _, obj := range decls[i].Objects {
			if key := plan.KeyOf(obj); !have[key] {
				gk := obj.GroupVersionKind().GroupKind()
				if missing[gk] == nil {
					missing[gk] = map[plan.Key]bool{}
				}
				missing[gk][key] = true
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names, err := cc.namesOf(ctx)
	if err != nil {
		return err
	}
	for gk, keys := range missing {
		// The kind's first read waits for its name cache to fill; a cluster that stops
		// answering meanwhile must not hold the pass up for long.
		fillCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		all, err := metadataOf(fillCtx, names, gk, rendered[gk])
		cancel()
		if err != nil {
			return err
		}
		for _, obj := range all {
			if keys[plan.KeyOf(obj)] {
				byKind[gk] = append(byKind[gk], obj)
			}
		}
	}
	return nil
}

// upgradeFromPrevious replaces the metadata-only objects of a direct read with full objects: the
// earlier (cached) read's when it has the same version, else a fresh GET. Only objects of this
// hub need content (to tell drift); the others only need their metadata.
func (s *Syncer) upgradeFromPrevious(ctx context.Context, cc *clusterClients, byKind, previous map[schema.GroupKind][]*unstructured.Unstructured) error {
	for gk, objs := range byKind {
		full := map[string]*unstructured.Unstructured{}
		for _, obj := range previous[gk] {
			full[obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
		for i, obj := range objs {
			if prev, ok := full[obj.GetNamespace()+"/"+obj.GetName()]; ok && prev.GetResourceVersion() == obj.GetResourceVersion() {
				objs[i] = prev
				continue
			}
			if !policyhubv1.OwnedBy(obj, s.opts.HubID) {
				continue
			}
			fresh := &unstructured.Unstructured{}
			fresh.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cc.client.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				if apierrors.IsNotFound(err) {
					continue // deleted meanwhile: planned from its metadata, the delete is a no-op
				}
				return fmt.Errorf("get %s %s: %w", gk, obj.GetName(), err)
			}
			objs[i] = fresh
		}
	}
	return nil
}

// listKind lists one kind; nil without error when the cluster does not serve it. A direct read
// (cached false) lists metadata only: it decides ownership and existence, which metadata carries.
func (s *Syncer) listKind(ctx context.Context, cc *clusterClients, gk schema.GroupKind, rendered map[schema.GroupKind]schema.GroupVersionKind, all, cached bool) ([]*unstructured.Unstructured, error) {
	mapping, err := cc.client.RESTMapper().RESTMapping(gk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // not served: nothing of this kind can exist
		}
		return nil, err
	}
	gvk := mapping.GroupVersionKind
	if want, ok := rendered[gk]; ok {
		gvk = want
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.MatchingLabels{policyhubv1.LabelManagedBy: s.opts.HubID})
	}
	if !cached {
		return metadataOf(ctx, cc.client, gk, gvk, opts...)
	}
	// The first read of a kind waits for its cache to fill; a cluster that stops answering
	// meanwhile must not hold the sync up for long.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The cache's own objects, not copies: a plan only reads them (diffs copy before trimming),
	// and copying every policy of the cluster on every pass cost a third of the hub's CPU.
	if err := cc.cache.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", gk, err)
	}
	s.watchOwned(ctx, cc, gvk)
	objs := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return objs, nil
}

// metadataOf lists the metadata of one kind's objects from reader (the cluster, or its name
// cache), as objects that carry only metadata: enough to decide ownership and existence.
func metadataOf(ctx context.Context, reader client.Reader, gk schema.GroupKind, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]*unstructured.Unstructured, error) {
	metaList := &metav1.PartialObjectMetadataList{}
	metaList.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := reader.List(ctx, metaList, opts...); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", gk, err)
	}
	objs := make([]*unstructured.Unstructured, 0, len(metaList.Items))
	for i := range metaList.Items {
		objs = append(objs, fromMetadata(&metaList.Items[i], gvk))
	}
	return objs, nil
}

// watchOwned tells OnOwnedChange about every change the kind's informer sees to an object this
// hub owns, once per kind: drift is corrected when it happens, not at the next resync, and
// Kyverno's readiness is seen when it is reported. It counts the owned objects the informers
// hold: once past the cache's bound, the cluster is flooded (see flood) at once, not at its next
// pass.
func (s *Syncer) watchOwned(ctx context.Context, cc *clusterClients, gvk schema.GroupVersionKind) {
	notify := s.opts.OnOwnedChange
	if notify == nil {
		notify = func(string, *unstructured.Unstructured, bool, bool) {}
	}
	if _, done := cc.watched.LoadOrStore(gvk.GroupKind(), true); done {
		return
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	informer, err := cc.cache.GetInformer(ctx, obj)
	if err != nil {
		cc.watched.Delete(gvk.GroupKind())
		return
	}
	owned := func(o any) (*unstructured.Unstructured, bool) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		u, ok := o.(*unstructured.Unstructured)
		return u, ok && policyhubv1.OwnedBy(u, s.opts.HubID)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		// Adds too: Kyverno may report a new policy ready before the cache first sees it. An
		// object of the cache's first list is not a change: the pass that reads it verifies it.
		AddFunc: func(o any, initial bool) {
			if u, ok := owned(o); ok {
				if n := cc.cachedOwned.Add(1); n == int64(s.opts.MaxOwnedObjects)+1 {
					// Not from the handler: dropping the cache waits for its handlers.
					go s.flooded(ctrllog.IntoContext(context.Background(), ctrllog.Log.WithValues("cluster", cc.name)), cc, int(n))
				}
				notify(cc.name, u, false, !initial && cc.verified.changed(u))
			}
		},
		UpdateFunc: func(_, o any) {
			if u, ok := owned(o); ok {
				notify(cc.name, u, false, cc.verified.changed(u))
			}
		},
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if u, ok := o.(*unstructured.Unstructured); ok {
				// Gone, or no longer labelled as ours: nothing of it is remembered.
				cc.verified.forget(plan.KeyOf(u))
			}
			if u, ok := owned(o); ok {
				cc.cachedOwned.Add(-1)
				notify(cc.name, u, true, false)
			}
		},
	})
	if err != nil {
		cc.watched.Delete(gvk.GroupKind())
	}
}

// write sends the changes of the declarations of indexes which, dryRun=All when dryRun.
