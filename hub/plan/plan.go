package plan

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Key identifies an object in a cluster. Objects are never keyed by name alone.
type Key struct {
	Group, Kind, Namespace, Name string
}

// KeyOf returns the object's key.
func KeyOf(obj *unstructured.Unstructured) Key {
	gvk := obj.GroupVersionKind()
	return Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func (k Key) String() string {
	group := k.Group
	if group != "" {
		group = "." + group
	}
	if k.Namespace == "" {
		return k.Kind + group + "/" + k.Name
	}
	return k.Kind + group + "/" + k.Namespace + "/" + k.Name
}

// Conflict is a desired object whose key is taken by an object this declaration does not own.
type Conflict struct {
	Desired *unstructured.Unstructured
	// Reason says who owns the live object, for the user.
	Reason string
}

// Plan is what a sync does in one cluster for one declaration.
type Plan struct {
	// Apply are the desired objects that are absent or owned by this declaration.
	Apply []*unstructured.Unstructured
	// Conflicts are left untouched and reported.
	Conflicts []Conflict
	// Delete are live objects owned by this declaration that it no longer renders.
	Delete []*unstructured.Unstructured
}

// Owned reports whether obj was written by hub hubID for the declaration source (see render.Owner.Source).
func Owned(obj *unstructured.Unstructured, hubID, source string) bool {
	return metaString(obj, "labels", policyhubv1.LabelManagedBy) == hubID && metaString(obj, "annotations", policyhubv1.AnnotationSource) == source
}

// metaString reads a label or annotation without copying the object's maps (GetLabels does):
// planning reads them for every live object of a cluster.
func metaString(obj *unstructured.Unstructured, field, key string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", field, key)
	s, _ := v.(string)
	return s
}

// Make plans one declaration (source) of hub hubID in one cluster. live holds the cluster's objects
// at the desired keys that exist, and every object there carrying hubID's managed-by label (of any
// source); each is matched by key. Prune off keeps owned objects no longer desired, except a
// preview's shadows.
func Make(hubID, source string, desired, live []*unstructured.Unstructured, prune bool) Plan {
	return NewLive(hubID, live).Make(source, desired, prune)
}

// Live is a cluster's live objects indexed once for planning many declarations against them: a
// plan then costs in proportion to the declaration's own objects, not to the cluster's.
type Live struct {
	hubID string
	byKey map[Key]*unstructured.Unstructured
	// owned are hub hubID's objects by source.
	owned map[string][]*unstructured.Unstructured
}

// NewLive indexes live (see Make for what it holds) for hub hubID.
func NewLive(hubID string, live []*unstructured.Unstructured) *Live {
	l := &Live{hubID: hubID, byKey: make(map[Key]*unstructured.Unstructured, len(live)), owned: map[string][]*unstructured.Unstructured{}}
	for _, obj := range live {
		l.byKey[KeyOf(obj)] = obj
		if metaString(obj, "labels", policyhubv1.LabelManagedBy) == hubID {
			source := metaString(obj, "annotations", policyhubv1.AnnotationSource)
			l.owned[source] = append(l.owned[source], obj)
		}
	}
	return l
}

// Get returns the live object at key, if any.
func (l *Live) Get(key Key) *unstructured.Unstructured {
	return l.byKey[key]
}

// Make plans the declaration source against the live objects (see the package's Make).
func (l *Live) Make(source string, desired []*unstructured.Unstructured, prune bool) Plan {
	var p Plan
	wanted := make(map[Key]bool, len(desired))
	for _, obj := range desired {
		key := KeyOf(obj)
		wanted[key] = true
		existing, found := l.byKey[key]
		switch {
		case !found || Owned(existing, l.hubID, source):
			p.Apply = append(p.Apply, obj)
		default:
			p.Conflicts = append(p.Conflicts, Conflict{Desired: obj, Reason: ownerOf(existing, l.hubID, key)})
		}
	}
	for _, obj := range l.owned[source] {
		// A preview's shadow goes when it is no longer wanted, prune or not: it only ever
		// reports, and a preview that ended must leave nothing behind.
		if !wanted[KeyOf(obj)] && (prune || policyhubv1.IsShadow(obj.GetLabels())) {
			p.Delete = append(p.Delete, obj)
		}
	}
	sortByKey(p.Apply)
	sortByKey(p.Delete)
	sort.Slice(p.Conflicts, func(i, j int) bool {
		return KeyOf(p.Conflicts[i].Desired).String() < KeyOf(p.Conflicts[j].Desired).String()
	})
	return p
}

func ownerOf(live *unstructured.Unstructured, hubID string, key Key) string {
	managedBy := live.GetLabels()[policyhubv1.LabelManagedBy]
	switch {
	case managedBy == "":
		return fmt.Sprintf("%s exists and is not managed by policyhub; it is left untouched", key)
	case managedBy != hubID:
		return fmt.Sprintf("%s is managed by another policyhub hub (%q); it is left untouched", key, managedBy)
	default:
		return fmt.Sprintf("%s belongs to %s of this hub; it is left untouched", key, live.GetAnnotations()[policyhubv1.AnnotationSource])
	}
}

func sortByKey(objs []*unstructured.Unstructured) {
	sort.Slice(objs, func(i, j int) bool { return KeyOf(objs[i]).String() < KeyOf(objs[j]).String() })
}
