package render

import (
	"errors"
	"fmt"
	"slices"

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

// maxRefusedMembers is how many refused members an error names; it says how many more there are.
const maxRefusedMembers = 5

// CheckMembers says why a set that allows allow (its spec.allow) may not ship members, naming
// each refused member by kind and name (at most five; how many more): an exception, a kind that
// is no policy, a member in the hub's namespace, or one that mutates, generates, deletes or
// verifies images without being allowed. nil when it may ship them all.
func CheckMembers(members []*unstructured.Unstructured, allow []policyhubv1.PolicyCapability) error {
	var errs []error
	refused := 0
	for _, m := range members {
		err := policyhubv1.CheckAllowed(m.Object, allow)
		if err == nil {
			continue
		}
		if refused++; refused <= maxRefusedMembers {
			errs = append(errs, fmt.Errorf("member %s: %w", memberName(m), err))
		}
	}
	if refused > maxRefusedMembers {
		errs = append(errs, fmt.Errorf("and %d more members refused", refused-maxRefusedMembers))
	}
	return errors.Join(errs...)
}

// MemberCapabilities are what the members do beyond validating, sorted, each once; members
// that are no policy the hub ships add nothing (CheckMembers refuses them).
func MemberCapabilities(members []*unstructured.Unstructured) []policyhubv1.PolicyCapability {
	var out []policyhubv1.PolicyCapability
	for _, m := range members {
		caps, err := policyhubv1.PolicyCapabilities(m.Object)
		if err != nil {
			continue
		}
		for _, c := range caps {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// memberName names a member as its source holds it: kind, namespace/name.
func memberName(m *unstructured.Unstructured) string {
	if ns := m.GetNamespace(); ns != "" {
		return m.GetKind() + " " + ns + "/" + m.GetName()
	}
	return m.GetKind() + " " + m.GetName()
}

// runtimeCopy deep-copies a JSON value, so that rendering never changes the members it shares.
func runtimeCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// SetVersion is a version of a set's members: its revision (the source digest) and members.
type SetVersion struct {
	Revision string
	Members  []*unstructured.Unstructured
}

// SetChoice is what one cluster gets during a set's rollout: the current version or (Stable) the
// last that completed the rollout, in Mode.
type SetChoice struct {
	Stable bool
	Mode   policyhubv1.Mode
}

// PolicySetTargets renders a PolicySet's members for the clusters its placement selected: every
// member to every cluster, rendered once per version and mode and shared between the clusters
// that get them. choices, when a rollout made them (non-nil), say which version and mode each
// cluster gets; a placed cluster without one, or whose stable version is not at hand, is held
// (gets nothing yet). Without a rollout (nil) every placed cluster gets current in the mode
// placed there. Targets.Revisions say which version each cluster gets.
func PolicySetTargets(hubID string, ps *policyhubv1.PolicySet, current, stable SetVersion, placed []placement.Target, choices map[string]SetChoice) (*Targets, error) {
	// What the set may ship is checked on every rendering, not only when a version is read: a
	// narrower spec.allow, or a snapshot kept from before these checks, ships nothing refused.
	for _, v := range []SetVersion{current, stable} {
		if err := CheckMembers(v.Members, ps.Spec.Allow); err != nil {
			return nil, &InvalidError{Reason: "MemberNotAllowed", Err: fmt.Errorf("PolicySet %s version %s: %w", ps.Name, v.Revision, err)}
		}
	}
	owner := PolicySetOwner(hubID, ps.Name)
	t := &Targets{Source: owner.Source(), Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{}, Revisions: map[string]string{}}
	rendered := map[string][]*unstructured.Unstructured{} // by revision and mode ("" keeps the members' own)
	for _, target := range placed {
		version, mode := current, target.Mode
		if choices != nil {
			choice, ok := choices[target.Cluster]
			if !ok || (choice.Stable && stable.Revision == "") {
				t.Held = append(t.Held, target.Cluster)
				continue
			}
			if choice.Stable {
				version = stable
			}
			mode = &choice.Mode
		}
		key := version.Revision + "/"
		if mode != nil {
			key += string(*mode)
		}
		objs, ok := rendered[key]
		if !ok {
			objs = make([]*unstructured.Unstructured, 0, len(version.Members))
			for _, m := range version.Members {
				obj, err := Member(owner, m, mode)
				if err == nil {
					var unit []*unstructured.Unstructured
					if unit, err = withCompanions(obj, mode); err == nil {
						objs = append(objs, unit...)
					}
				}
				if err != nil {
					return nil, &InvalidError{Reason: "InvalidMember", Err: fmt.Errorf("render PolicySet %s member %s %s: %w", ps.Name, m.GetKind(), m.GetName(), err)}
				}
			}
			rendered[key] = objs
		}
		t.Objects[target.Cluster] = objs
		t.DryRun[target.Cluster] = target.DryRun
		t.Revisions[target.Cluster] = version.Revision
	}
	return t, nil
}
