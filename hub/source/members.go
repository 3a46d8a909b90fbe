package source

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Inline reads the policies a PolicySet lists itself. Admission checked each one as a
// PolicyTemplate; a member also needs a name, and may be listed once.
func Inline(templates []policyhubv1.PolicyTemplate, limits Limits) (*Artifact, error) {
	if len(templates) > limits.MaxPolicies {
		return nil, fmt.Errorf("spec.source.inline lists %d policies, over %d", len(templates), limits.MaxPolicies)
	}
	art := &Artifact{}
	seen := map[string]int{}
	for i, tmpl := range templates {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": tmpl.APIVersion, "kind": tmpl.Kind}}
		u.SetName(tmpl.Metadata.Name)
		u.SetNamespace(tmpl.Metadata.Namespace)
		u.SetLabels(tmpl.Metadata.Labels)
		u.SetAnnotations(tmpl.Metadata.Annotations)
		if tmpl.Spec != nil && len(tmpl.Spec.Raw) > 0 {
			spec := map[string]any{}
			// apimachinery's decoder keeps integers int64, as objects read from the API have them.
			if err := utiljson.Unmarshal(tmpl.Spec.Raw, &spec); err != nil {
				return nil, fmt.Errorf("spec.source.inline[%d].spec: %w", i, err)
			}
			u.Object["spec"] = spec
		}
		p, err := member(u)
		if err != nil {
			return nil, fmt.Errorf("spec.source.inline[%d]: %w", i, err)
		}
		id := identity(p)
		if first, dup := seen[id]; dup {
			return nil, fmt.Errorf("spec.source.inline[%d]: %s is listed at [%d] already: a policy may be in a set once", i, id, first)
		}
		seen[id] = i
		art.Policies = append(art.Policies, p)
	}
	return art.sealed()
}

// ConfigMaps reads the policies of a PolicySet's ConfigMaps: every YAML document of every key
// ending in .yaml or .yml, in the order of the ConfigMaps' names and their keys.
func ConfigMaps(cms []corev1.ConfigMap, limits Limits) (*Artifact, error) {
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
	art := &Artifact{}
	seen := map[string]string{}
	var total int64
	for _, cm := range cms {
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			if strings.HasSuffix(k, ".yaml") || strings.HasSuffix(k, ".yml") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			where := "ConfigMap " + cm.Name + " key " + k
			data := cm.Data[k]
			if total += int64(len(data)); total > limits.MaxTotalBytes {
				return nil, fmt.Errorf("the ConfigMaps' YAML is over %d bytes", limits.MaxTotalBytes)
			}
			if err := art.takeFile([]byte(data), where, seen, limits.MaxPolicies); err != nil {
				return nil, err
			}
		}
	}
	return art.sealed()
}

// sealed sorts the policies and pins them by the sha256 of their JSON, for sources that have no
// digest of their own.
func (a *Artifact) sealed() (*Artifact, error) {
	slices.SortFunc(a.Policies, func(x, y *unstructured.Unstructured) int { return strings.Compare(identity(x), identity(y)) })
	digest, err := MembersDigest(a.Policies)
	if err != nil {
		return nil, err
	}
	a.Digest = digest
	return a, nil
}

func encodeMembers(policies []*unstructured.Unstructured) ([]byte, error) {
	objs := make([]map[string]any, 0, len(policies))
	for _, p := range policies {
		objs = append(objs, p.Object)
	}
	data, err := json.Marshal(objs)
	if err != nil {
		return nil, fmt.Errorf("encode the members: %w", err)
	}
	return data, nil
}

// Select narrows policies to a set's members: those matching every include list given and no
// exclude list (sel nil: all of them).
func Select(policies []*unstructured.Unstructured, sel *policyhubv1.MemberSelector) ([]*unstructured.Unstructured, error) {
	if sel == nil {
		return policies, nil
	}
	var match labels.Selector
	if sel.LabelSelector != nil {
		var err error
		if match, err = metav1.LabelSelectorAsSelector(sel.LabelSelector); err != nil {
			return nil, fmt.Errorf("spec.select.labelSelector: %w", err)
		}
	}
	var out []*unstructured.Unstructured
	for _, p := range policies {
		kind, name := p.GetKind(), p.GetName()
		switch {
		case len(sel.IncludeKinds) > 0 && !slices.Contains(sel.IncludeKinds, kind),
			slices.Contains(sel.ExcludeKinds, kind),
			len(sel.IncludeNames) > 0 && !slices.Contains(sel.IncludeNames, name),
			slices.Contains(sel.ExcludeNames, name),
			match != nil && !match.Matches(labels.Set(p.GetLabels())):
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Ref names a member for a status.
func Ref(p *unstructured.Unstructured) policyhubv1.MemberRef {
	return policyhubv1.MemberRef{Kind: p.GetKind(), Namespace: p.GetNamespace(), Name: p.GetName()}
}

// Changes compares two versions of a set's members: the members added, changed (any field) and
// removed, at most policyhubv1.MaxChangedMembers of each, and how many were left out.
func Changes(from, to []*unstructured.Unstructured) (added, changed, removed []policyhubv1.MemberRef, omitted int32) {
	old := make(map[string]*unstructured.Unstructured, len(from))
	for _, p := range from {
		old[identity(p)] = p
	}
	keep := func(list *[]policyhubv1.MemberRef, p *unstructured.Unstructured) {
		if len(*list) < policyhubv1.MaxChangedMembers {
			*list = append(*list, Ref(p))
		} else {
			omitted++
		}
	}
	for _, p := range to {
		id := identity(p)
		was, ok := old[id]
		delete(old, id)
		switch {
		case !ok:
			keep(&added, p)
		case !equalJSON(was.Object, p.Object):
			keep(&changed, p)
		}
	}
	gone := make([]*unstructured.Unstructured, 0, len(old))
	for _, p := range old {
		gone = append(gone, p)
	}
	slices.SortFunc(gone, func(x, y *unstructured.Unstructured) int { return strings.Compare(identity(x), identity(y)) })
	for _, p := range gone {
		keep(&removed, p)
	}
	return added, changed, removed, omitted
}

func equalJSON(a, b map[string]any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}
