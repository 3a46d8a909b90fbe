package work

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/plan"
)

// A cluster that holds more objects labelled as this hub's than its cache may keep
// (Options.MaxOwnedObjects) is flooded: the label is public, and a cluster admin, or a tenant
// allowed to write Kyverno policies in a namespace there, may put it on objects by the thousand.
// Its watch cache is dropped (the hub's memory stays bounded) and not made again while the flood
// lasts; its passes read directly only what their declarations need (their objects by name, and
// what claims to be theirs by their source labels, page by page), so every declaration is still
// synced and pruned there. Without a watch, drift there is looked for at each recount (below:
// every declaration is synced again) rather than at once, which the declarations' messages say. The flood is counted again, page by page, at most every
// Options.FloodRecheck, and the cache comes back once it is gone.

// floodPage is how many objects one list of a flooded cluster reads: what a pass holds at once of
// the objects it looks through.
const floodPage = 500

// flood is what is known of a flooded cluster.
type flood struct {
	// count is how many objects labelled as this hub's the cluster held when found flooded (at
	// least; counting stops past the bound).
	count   int
	checked time.Time
	// ready is Kyverno's readiness of the objects the last direct reads found, by key: what the
	// watch cache tells of the others.
	mu    sync.Mutex
	ready map[plan.Key]bool
}

// TooManyOwnedError is a cluster holding more objects labelled as this hub's than its watch
// cache may keep (Options.MaxOwnedObjects).
type TooManyOwnedError struct {
	Cluster    string
	Count, Max int
	// Recheck is how often the cluster is counted again, and its drift looked for.
	Recheck time.Duration
}

func (e *TooManyOwnedError) Error() string {
	return fmt.Sprintf("cluster %s holds %d objects labelled as this hub's (%s), more than the %d its cache may keep: synced from direct reads, drift corrected every %s; find who labels objects there (kubectl get clusterpolicies,policies -A -l %s)",
		e.Cluster, e.Count, policyhubv1.LabelManagedBy, e.Max, e.Recheck, policyhubv1.LabelManagedBy)
}

// Flooded says whether the cluster is flooded (see flood), and how many objects labelled as this
// hub's it held when found so.
func (s *Syncer) Flooded(cluster string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.floods[cluster]; f != nil {
		return f.count, true
	}
	return 0, false
}

// CachedOwned is how many objects labelled as this hub's the cluster's watch cache holds now.
func (s *Syncer) CachedOwned(cluster string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cc := s.clients[cluster]; cc != nil {
		return int(cc.cachedOwned.Load())
	}
	return 0
}

// floodOf is the cluster's flood, nil when it is not flooded.
func (s *Syncer) floodOf(cluster string) *flood {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floods[cluster]
}

// flooded records that the cluster holds count objects labelled as this hub's, more than its
// cache may keep, and drops its cache.
func (s *Syncer) flooded(ctx context.Context, cc *clusterClients, count int) {
	s.mu.Lock()
	_, was := s.floods[cc.name]
	if !was {
		s.floods[cc.name] = &flood{count: count, checked: time.Now(), ready: map[plan.Key]bool{}}
	}
	s.mu.Unlock()
	if !was {
		err := &TooManyOwnedError{Cluster: cc.name, Count: count, Max: s.opts.MaxOwnedObjects, Recheck: s.opts.FloodRecheck}
		ctrllog.FromContext(ctx).Info("cluster flooded with objects labelled as this hub's: its cache is dropped, its passes read directly", "reason", err.Error())
	}
	s.dropClients(cc.name, cc)
}

// stillFlooded says whether the cluster is flooded, counting its owned objects again when the
// last count is older than Options.FloodRecheck; the flood ends once they fit the cache.
func (s *Syncer) stillFlooded(ctx context.Context, cc *clusterClients) (bool, error) {
	f := s.floodOf(cc.name)
	if f == nil {
		return false, nil
	}
	s.mu.Lock()
	due := time.Since(f.checked) >= s.opts.FloodRecheck
	if due {
		f.checked = time.Now() // one count at a time, whatever it answers
	}
	s.mu.Unlock()
	if !due {
		return true, nil
	}
	n, _, err := s.countOwned(ctx, cc, s.opts.MaxOwnedObjects)
	if err != nil {
		return true, err
	}
	if n > s.opts.MaxOwnedObjects {
		s.mu.Lock()
		f.count = n
		s.mu.Unlock()
		return true, nil
	}
	s.mu.Lock()
	delete(s.floods, cc.name)
	s.mu.Unlock()
	ctrllog.FromContext(ctx).Info("cluster no longer flooded: its cache is made again", "owned", n)
	return false, nil
}

// countOwned counts the objects labelled as this hub's in the cluster, of every kind that may
// hold them (surveyKinds), page by page (only metadata, and one page at a time in memory); it
// stops once past limit. It returns the kinds found holding some.
func (s *Syncer) countOwned(ctx context.Context, cc *clusterClients, limit int) (int, map[schema.GroupKind]bool, error) {
	kinds, err := surveyKinds(cc)
	if err != nil {
		return 0, nil, err
	}
	owned := client.MatchingLabels{policyhubv1.LabelManagedBy: s.opts.HubID}
	n, found := 0, map[schema.GroupKind]bool{}
	for _, gk := range kinds {
		err := s.eachPage(ctx, cc, gk, owned, func(objs []*unstructured.Unstructured) bool {
			n += len(objs)
			if len(objs) > 0 {
				found[gk] = true
			}
			return n <= limit
		})
		if err != nil {
			return 0, nil, fmt.Errorf("count the cluster's objects of this hub: %w", err)
		}
		if n > limit {
			break
		}
	}
	return n, found, nil
}

// eachPage lists the metadata of the kind's objects selected by opts, floodPage at a time, and
// hands each page to page until it returns false. A kind the cluster does not serve has none.
func (s *Syncer) eachPage(ctx context.Context, cc *clusterClients, gk schema.GroupKind, opts client.ListOption, page func([]*unstructured.Unstructured) bool) error {
	mapping, err := cc.client.RESTMapper().RESTMapping(gk)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	next := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
		if err := cc.client.List(ctx, list, opts, client.Limit(floodPage), client.Continue(next)); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return nil
			}
			return fmt.Errorf("list %s: %w", gk, err)
		}
		objs := make([]*unstructured.Unstructured, 0, len(list.Items))
		for i := range list.Items {
			objs = append(objs, fromMetadata(&list.Items[i], mapping.GroupVersionKind))
		}
		if !page(objs) || list.Continue == "" {
			return nil
		}
		next = list.Continue
	}
}

// readDirect is a flooded cluster's read for a plan of the declarations of indexes which (of the
// kinds only, when set): their objects by name (anyone's, in full: to compare, and to tell a
// same-named object of someone else), and the metadata of the objects that claim to be theirs
// (this hub's label, their source labels and annotation: to prune). What it keeps of the latter
// is bounded by the cache's bound; the rest waits for a later pass.
func (s *Syncer) readDirect(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, only map[schema.GroupKind]bool) (map[schema.GroupKind][]*unstructured.Unstructured, error) {
	out := map[schema.GroupKind][]*unstructured.Unstructured{}
	sources := map[string]bool{}
	for _, i := range which {
		sources[decls[i].Source] = true
	}
	selectors, err := claimants(s.opts.HubID, sources)
	if err != nil {
		return nil, err
	}
	kinds, err := surveyKinds(cc)
	if err != nil {
		return nil, err
	}
	kept := 0
	for _, gk := range kinds {
		if only != nil && !only[gk] {
			continue
		}
		for _, sel := range selectors {
			err := s.eachPage(ctx, cc, gk, client.MatchingLabelsSelector{Selector: sel}, func(objs []*unstructured.Unstructured) bool {
				for _, obj := range objs {
					if sources[obj.GetAnnotations()[policyhubv1.AnnotationSource]] && kept < s.opts.MaxOwnedObjects {
						out[gk] = append(out[gk], obj)
						kept++
					}
				}
				return kept < s.opts.MaxOwnedObjects
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if err := s.getDesired(ctx, cc, decls, which, only, out); err != nil {
		return nil, err
	}
	s.noteReadiness(cc.name, out)
	return out, nil
}

// claimants select the objects that may claim to be of the declarations of sources: this hub's,
// with one of their names as source-name label, or with none (a name too long for a label).
func claimants(hubID string, sources map[string]bool) ([]labels.Selector, error) {
	var names []string
	unlabelled := false
	for source := range sources {
		name := source[strings.LastIndex(source, "/")+1:]
		if len(validation.IsValidLabelValue(name)) == 0 {
			names = append(names, name)
		} else {
			unlabelled = true // its objects carry no source-name label (see render.Owner.Labels)
		}
	}
	sort.Strings(names)
	managedBy, err := labels.NewRequirement(policyhubv1.LabelManagedBy, selection.Equals, []string{hubID})
	if err != nil {
		return nil, fmt.Errorf("select this hub's objects: %w", err)
	}
	var selectors []labels.Selector
	if len(names) > 0 {
		named, err := labels.NewRequirement(policyhubv1.LabelSourceName, selection.In, names)
		if err != nil {
			return nil, fmt.Errorf("select the objects of %v: %w", names, err)
		}
		selectors = append(selectors, labels.NewSelector().Add(*managedBy, *named))
	}
	if unlabelled {
		nameless, err := labels.NewRequirement(policyhubv1.LabelSourceName, selection.DoesNotExist, nil)
		if err != nil {
			return nil, err
		}
		selectors = append(selectors, labels.NewSelector().Add(*managedBy, *nameless))
	}
	return selectors, nil
}

// getDesired reads the declarations' objects by name, in full, into byKind (in place of what
// was listed of them).
func (s *Syncer) getDesired(ctx context.Context, cc *clusterClients, decls []Declaration, which []int, only map[schema.GroupKind]bool, byKind map[schema.GroupKind][]*unstructured.Unstructured) error {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		found = map[plan.Key]*unstructured.Unstructured{}
		sem   = make(chan struct{}, s.opts.Concurrency)
	)
	seen := map[plan.Key]bool{}
	for _, i := range which {
		for _, desired := range decls[i].Objects {
			gvk := desired.GroupVersionKind()
			key := plan.KeyOf(desired)
			if seen[key] || (only != nil && !only[gvk.GroupKind()]) {
				continue
			}
			seen[key] = true
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				live := &unstructured.Unstructured{}
				live.SetGroupVersionKind(gvk)
				err := cc.client.Get(ctx, types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					found[key] = live
				case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
				case first == nil:
					first = fmt.Errorf("get %s: %w", key, err)
				}
			}()
		}
	}
	wg.Wait()
	if first != nil {
		return first
	}
	for gk, objs := range byKind {
		kept := objs[:0]
		for _, obj := range objs {
			if _, full := found[plan.KeyOf(obj)]; !full {
				kept = append(kept, obj)
			}
		}
		byKind[gk] = kept
	}
	for _, obj := range found {
		gk := obj.GroupVersionKind().GroupKind()
		byKind[gk] = append(byKind[gk], obj)
	}
	return nil
}

// maxReadiness bounds the readiness a flooded cluster keeps.
const maxReadiness = 10000

// noteReadiness keeps Kyverno's readiness of the objects a flooded cluster's direct read found
// in full: what says a declaration is in force there, without a watch cache.
func (s *Syncer) noteReadiness(cluster string, byKind map[schema.GroupKind][]*unstructured.Unstructured) {
	f := s.floodOf(cluster)
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ready) > maxReadiness {
		clear(f.ready) // what no pass reads any more (pruned objects) goes
	}
	for _, objs := range byKind {
		for _, obj := range objs {
			if ready, known := engineReady(obj); known {
				f.ready[plan.KeyOf(obj)] = ready
			}
		}
	}
}

// readyAt says whether Kyverno reported the object ready when a flooded cluster's direct read
// last found it.
func (f *flood) readyAt(key plan.Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready[key]
}

// fromMetadata is an object that carries only the metadata listed.
func fromMetadata(m *metav1.PartialObjectMetadata, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(m.Namespace)
	obj.SetName(m.Name)
	obj.SetUID(m.UID)
	obj.SetResourceVersion(m.ResourceVersion)
	obj.SetLabels(m.Labels)
	obj.SetAnnotations(m.Annotations)
	return obj
}
