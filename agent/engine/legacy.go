package engine

import (
	"cmp"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// MaxTrackedPerKind bounds the legacy objects of one kind whose names a LegacyStore keeps: about
// 100 bytes each, so at most ~1 MiB per kind however many objects a cluster holds. Objects
// beyond it are counted, not kept: adds and deletes keep the counts exact, and only an owner
// change of an object not kept goes uncounted until the next full list.
const MaxTrackedPerKind = 10000

type objectKey struct{ namespace, name string }

// LegacyStore is one legacy kind's inventory, filled by a reflector over the kind's metadata
// (it is a cache.ReflectorStore): for each object only its namespace, name and owner, up to a
// bound, and counts by owner of the rest.
type LegacyStore struct {
	kind    string
	max     int
	changed func()

	mu      sync.Mutex
	synced  bool
	tracked map[objectKey]policyhubv1.LegacyOwner
	// beyond counts by owner the objects not tracked, once max are.
	beyond map[policyhubv1.LegacyOwner]int64
}

// NewLegacyStore returns an empty store of kind keeping at most max names (MaxTrackedPerKind when
// 0); changed is called after every change of what it holds (not after an update that changes
// neither an object's presence nor its owner: Kyverno writes policies' status often).
func NewLegacyStore(kind string, max int, changed func()) *LegacyStore {
	if max <= 0 {
		max = MaxTrackedPerKind
	}
	if changed == nil {
		changed = func() {}
	}
	return &LegacyStore{kind: kind, max: max, changed: changed, tracked: map[objectKey]policyhubv1.LegacyOwner{}, beyond: map[policyhubv1.LegacyOwner]int64{}}
}

// OwnerOf says who owns an object with these labels: policyhub when it carries policyhub's
// managed-by label (whatever its value: another hub's objects are policyhub's too), else other.
func OwnerOf(labels map[string]string) policyhubv1.LegacyOwner {
	if _, ok := labels[policyhubv1.LabelManagedBy]; ok {
		return policyhubv1.LegacyOwnerPolicyhub
	}
	return policyhubv1.LegacyOwnerOther
}

// Transformer slims what the reflector holds while it first lists (cache.TransformingStore) to
// what the store reads: namespace, name and the managed-by label.
func (s *LegacyStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return obj, nil
		}
		slim := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), ResourceVersion: m.GetResourceVersion()}}
		if OwnerOf(m.GetLabels()) == policyhubv1.LegacyOwnerPolicyhub {
			slim.Labels = map[string]string{policyhubv1.LabelManagedBy: m.GetLabels()[policyhubv1.LabelManagedBy]}
		}
		return slim, nil
	}
}

func keyOf(obj any) (objectKey, policyhubv1.LegacyOwner, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return objectKey{}, "", false
	}
	return objectKey{m.GetNamespace(), m.GetName()}, OwnerOf(m.GetLabels()), true
}

// Add records a new object.
func (s *LegacyStore) Add(obj any) error {
	key, owner, ok := keyOf(obj)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(key, owner)
	s.changed()
	return nil
}

// add tracks key, or counts it beyond the bound; s.mu is held.
func (s *LegacyStore) add(key objectKey, owner policyhubv1.LegacyOwner) {
	if _, known := s.tracked[key]; known || len(s.tracked) < s.max {
		s.tracked[key] = owner
		return
	}
	s.beyond[owner]++
}

// Update records an object's new owner. An object not tracked is one counted beyond the bound
// (the reflector updates only objects it added): it is tracked now if there is room.
func (s *LegacyStore) Update(obj any) error {
	key, owner, ok := keyOf(obj)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if was, known := s.tracked[key]; known {
		if was != owner {
			s.tracked[key] = owner
			s.changed()
		}
		return nil
	}
	if s.uncount(owner) && len(s.tracked) >= s.max {
		s.beyond[owner]++ // still beyond: only its owner may have changed
		return nil
	}
	s.tracked[key] = owner
	s.changed()
	return nil
}

// uncount takes one object of owner off the counts beyond the bound (of the other owner when
// owner has none: its owner changed unseen); false when there were none. s.mu is held.
func (s *LegacyStore) uncount(owner policyhubv1.LegacyOwner) bool {
	if s.beyond[owner] > 0 {
		s.beyond[owner]--
		return true
	}
	for o, n := range s.beyond {
		if n > 0 {
			s.beyond[o]--
			return true
		}
	}
	return false
}

// Delete forgets an object.
func (s *LegacyStore) Delete(obj any) error {
	key, owner, ok := keyOf(obj)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.tracked[key]; known {
		delete(s.tracked, key)
	} else if !s.uncount(owner) {
		return nil // never seen: nothing changes
	}
	s.changed()
	return nil
}

// Replace replaces everything with list (a full list of the kind): objects not owned by
// policyhub are tracked first, so the names a summary shows are theirs whenever there are more
// objects than the bound.
func (s *LegacyStore) Replace(list []any, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tracked = make(map[objectKey]policyhubv1.LegacyOwner, min(len(list), s.max))
	s.beyond = map[policyhubv1.LegacyOwner]int64{}
	for _, first := range []policyhubv1.LegacyOwner{policyhubv1.LegacyOwnerOther, policyhubv1.LegacyOwnerPolicyhub} {
		for _, obj := range list {
			if key, owner, ok := keyOf(obj); ok && owner == first {
				s.add(key, owner)
			}
		}
	}
	s.synced = true
	s.changed()
	return nil
}

// Resync does nothing: the store holds no queue.
func (s *LegacyStore) Resync() error { return nil }

// Synced says whether the kind was listed once.
func (s *LegacyStore) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// Tracked is how many objects' names the store keeps (at most its bound).
func (s *LegacyStore) Tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tracked)
}

// LegacyKind is one kind's part of an inventory: counts by owner, and the first names in the
// summary's order (at most MaxLegacyNames).
type LegacyKind struct {
	Kind    string
	Counts  map[policyhubv1.LegacyOwner]int64
	Objects []policyhubv1.LegacyObject
}

// Snapshot returns the kind's counts and first names now.
func (s *LegacyStore) Snapshot() LegacyKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := LegacyKind{Kind: s.kind, Counts: map[policyhubv1.LegacyOwner]int64{}}
	for owner, n := range s.beyond {
		k.Counts[owner] += n
	}
	objects := make([]policyhubv1.LegacyObject, 0, len(s.tracked))
	for key, owner := range s.tracked {
		k.Counts[owner]++
		objects = append(objects, policyhubv1.LegacyObject{Kind: s.kind, Namespace: key.namespace, Name: key.name, Owner: owner})
	}
	slices.SortFunc(objects, compareObjects)
	k.Objects = objects[:min(len(objects), policyhubv1.MaxLegacyNames)]
	return k
}

// compareObjects orders legacy objects as a summary lists them: not policyhub's first, then by
// kind, namespace and name.
func compareObjects(a, b policyhubv1.LegacyObject) int {
	return cmp.Or(cmp.Compare(ownerRank(a.Owner), ownerRank(b.Owner)), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func ownerRank(o policyhubv1.LegacyOwner) int {
	if o == policyhubv1.LegacyOwnerOther {
		return 0
	}
	return 1
}

// Inventory folds the kinds' parts into a summary's inventory: every nonzero count by kind and
// owner (sorted), and the first MaxLegacyNames objects in the summary's order.
func Inventory(kinds []LegacyKind) *policyhubv1.LegacyInventory {
	inv := &policyhubv1.LegacyInventory{}
	var objects []policyhubv1.LegacyObject
	for _, k := range kinds {
		for owner, n := range k.Counts {
			if n > 0 {
				inv.Counts = append(inv.Counts, policyhubv1.LegacyCount{Kind: k.Kind, Owner: owner, Count: n})
			}
		}
		objects = append(objects, k.Objects...)
	}
	slices.SortFunc(inv.Counts, func(a, b policyhubv1.LegacyCount) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(ownerRank(a.Owner), ownerRank(b.Owner)))
	})
	slices.SortFunc(objects, compareObjects)
	objects = slices.CompactFunc(objects, func(a, b policyhubv1.LegacyObject) bool { return compareObjects(a, b) == 0 })
	if len(objects) > 0 {
		inv.Objects = objects[:min(len(objects), policyhubv1.MaxLegacyNames)]
	}
	return inv
}
