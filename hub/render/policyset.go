package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

// PolicySetOwner is the owner of what a PolicySet renders.
func PolicySetOwner(hubID, name string) Owner {
	return Owner{HubID: hubID, Kind: policyhubv1.KindPolicySet, Name: name}
}

// Member renders one member of a set (a policy as its source holds it, never changed here):
// mode override where the member's kind has a failure action (a set's mode leaves the others as
// they are), the hub exempted, ownership labels and annotations, content hash.
func Member(owner Owner, policy *unstructured.Unstructured, mode *policyhubv1.Mode) (*unstructured.Unstructured, error) {
	if err := owner.Validate(); err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policy.GetAPIVersion(), "kind": policy.GetKind(),
	}}
	if spec, ok := policy.Object["spec"]; ok {
		obj.Object["spec"] = runtimeCopy(spec)
	} else {
		obj.Object["spec"] = map[string]any{}
	}
	obj.SetName(policy.GetName())
	obj.SetNamespace(policy.GetNamespace())
	if mode != nil && HasMode(obj.GroupVersionKind()) {
		if err := SetMode(obj, *mode); err != nil {
			return nil, err
		}
	}
	if err := ExemptHub(obj); err != nil {
		return nil, err
	}
	if err := stamp(owner, obj, policy.GetLabels(), policy.GetAnnotations()); err != nil {
		return nil, err
	}
	return obj, nil
}

// runtimeCopy deep-copies a JSON value, so that rendering never changes the members it shares.
func runtimeCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// PolicySetTargets renders a PolicySet's members for the clusters its placement selected: every
// member to every cluster, rendered once per mode and shared between the clusters of that mode.
func PolicySetTargets(hubID string, ps *policyhubv1.PolicySet, members []*unstructured.Unstructured, placed []placement.Target) (*Targets, error) {
	owner := PolicySetOwner(hubID, ps.Name)
	t := &Targets{Source: owner.Source(), Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{}}
	rendered := map[string][]*unstructured.Unstructured{} // by mode; "" keeps the members' own
	for _, target := range placed {
		key := ""
		if target.Mode != nil {
			key = string(*target.Mode)
		}
		objs, ok := rendered[key]
		if !ok {
			objs = make([]*unstructured.Unstructured, 0, len(members))
			for _, m := range members {
				obj, err := Member(owner, m, target.Mode)
				if err != nil {
					return nil, &InvalidError{Reason: "InvalidMember", Err: fmt.Errorf("render PolicySet %s member %s %s: %w", ps.Name, m.GetKind(), m.GetName(), err)}
				}
				objs = append(objs, obj)
			}
			rendered[key] = objs
		}
		t.Objects[target.Cluster] = objs
		t.DryRun[target.Cluster] = target.DryRun
	}
	return t, nil
}
