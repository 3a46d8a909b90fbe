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
	return obj.GetLabels()[policyhubv1.LabelManagedBy] == hubID && obj.GetAnnotations()[policyhubv1.AnnotationSource] == source
}

// Make plans one declaration (source) of hub hubID in one cluster. live holds the cluster's objects
// at the desired keys that exist, and every object there carrying hubID's managed-by label (of any
// source); each is matched by key. Prune off keeps owned objects no longer desired.
func Make(hubID, source string, desired, live []*unstructured.Unstructured, prune bool) Plan {
	liveByKey := make(map[Key]*unstructured.Unstructured, len(live))
	for _, obj := range live {
		liveByKey[KeyOf(obj)] = obj
	}
	var p Plan
	wanted := make(map[Key]bool, len(desired))
	for _, obj := range desired {
		key := KeyOf(obj)
		wanted[key] = true
		existing, found := liveByKey[key]
		switch {
		case !found || Owned(existing, hubID, source):
			p.Apply = append(p.Apply, obj)
		default:
			p.Conflicts = append(p.Conflicts, Conflict{Desired: obj, Reason: ownerOf(existing, hubID, key)})
		}
	}
	if prune {
		for _, obj := range live {
			if Owned(obj, hubID, source) && !wanted[KeyOf(obj)] {
				p.Delete = append(p.Delete, obj)
			}
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
