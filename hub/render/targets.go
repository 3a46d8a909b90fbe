package render

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
)

// Targets is what one declaration wants in each cluster its placement selects. The hub's
// reconcilers and the CLI's dry-run both build their syncs from it.
type Targets struct {
	// Source identifies the declaration (Owner.Source()).
	Source string
	// Objects are the rendered objects by cluster; DryRun says which clusters only plan.
	// Clusters that get the same content share the same objects (a thousand copies of each
	// policy were a quarter of the hub's memory at fleet scale): they must never be changed.
	Objects map[string][]*unstructured.Unstructured
	DryRun  map[string]bool
	// Unknown are clusters the placement names that the inventory lacks.
	Unknown []string
	// NotGranted are the places (cluster/namespace) an ApplicationPolicy asked for that no
	// grant gives its namespace: never dispatched. Sorted.
	NotGranted []string
	// MissingPlacement says why the placementRef selects nothing: the OCM Placement it names
	// does not exist; "" otherwise.
	MissingPlacement string
	// Held are the placed clusters a rollout gives nothing yet, sorted.
	Held []string
	// Revisions say which version of the declaration each cluster gets, for kinds with versions
	// (a PolicySet's source digest); nil otherwise.
	Revisions map[string]string
}

// Clusters are the selected clusters, sorted.
func (t *Targets) Clusters() []string {
	out := make([]string, 0, len(t.Objects))
	for c := range t.Objects {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Fingerprint sums up what a sync of the targets depends on: the clusters, the content of every
// object (its content hash), dry-run and the unknown clusters.
func (t *Targets) Fingerprint() string {
	var b strings.Builder
	// Clusters share their objects (a set's hundred members, in a thousand clusters): each
	// shared list is summed up once, and named by its index after that.
	type list struct {
		array **unstructured.Unstructured // the list's backing array: the same only when shared
		n     int
	}
	shared := map[list]int{}
	for i, c := range t.Clusters() {
		fmt.Fprintf(&b, "%s/%v:", c, t.DryRun[c])
		objs := t.Objects[c]
		if len(objs) > 1 {
			key := list{&objs[0], len(objs)}
			if j, ok := shared[key]; ok {
				fmt.Fprintf(&b, " =%d;", j)
				continue
			}
			shared[key] = i
		}
		for _, obj := range objs {
			fmt.Fprintf(&b, " %s/%s/%s@%s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), obj.GetAnnotations()[policyhubv1.AnnotationContentHash])
		}
		b.WriteString(";")
	}
	fmt.Fprint(&b, t.Unknown, t.MissingPlacement, t.Held, t.NotGranted)
	return b.String()
}

// InvalidError is a declaration that cannot be dispatched until it is changed: Reason says
// which part (InvalidPlacement, InvalidTemplate, InvalidPolicy).
type InvalidError struct {
	Reason string
	Err    error
}

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// AsInvalid returns the InvalidError in err's chain, if any.
func AsInvalid(err error) (*InvalidError, bool) {
	var ie *InvalidError
	ok := errors.As(err, &ie)
	return ie, ok
}

// Version is the version of a FleetPolicy one cluster gets during a rollout.
type Version struct {
	// Template is the version's template; nil is the spec's.
	Template *policyhubv1.PolicyTemplate
	// Revision names a Template given (it keys the renderings shared between clusters).
	Revision string
	Mode     policyhubv1.Mode
	// Keep, in a swap, is the version kept beside this one until the cluster's wave is done (the
	// stable version, in Enforce): the cluster never enforces neither.
	Keep *Version
}

// FleetPolicyTargets renders a FleetPolicy for the clusters its placement selected (placed).
// versions, when a rollout chose them (non-nil), say which version and mode each cluster gets; a
// placed cluster without one is held (gets nothing yet). Without a rollout (nil) every placed
// cluster gets the spec's template, in the mode placed there. Who is placed and what a rollout
// chooses are decided before (hub/declare): rendering only renders.
func FleetPolicyTargets(hubID string, fp *policyhubv1.FleetPolicy, placed []placement.Target, versions map[string]Version) (*Targets, error) {
	t := &Targets{
		Source:  FleetPolicyOwner(hubID, fp.Name).Source(),
		Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{},
	}
	choose := versions != nil
	// The spec's template is checked whether or not any cluster is placed yet.
	if err := checkTemplate(hubID, fp, fp.Spec.Template); err != nil {
		return nil, err
	}
	// The policy depends only on the version and the mode: render it once per pair, and share it.
	rendered := map[string][]*unstructured.Unstructured{} // mode "" is the template's own
	for _, target := range placed {
		tmpl, revision, mode := &fp.Spec.Template, "", target.Mode
		if choose {
			v, ok := versions[target.Cluster]
			if !ok {
				t.Held = append(t.Held, target.Cluster)
				continue
			}
			if v.Template != nil {
				tmpl, revision = v.Template, v.Revision
				if err := checkTemplate(hubID, fp, *tmpl); err != nil {
					return nil, err
				}
			}
			mode = &v.Mode
		}
		objs, err := renderVersion(hubID, fp, tmpl, revision, mode, rendered)
		if err != nil {
			return nil, err
		}
		t.Objects[target.Cluster] = objs
		if v, ok := versions[target.Cluster]; ok && v.Keep != nil && v.Keep.Template != nil {
			kept, err := renderVersion(hubID, fp, v.Keep.Template, v.Keep.Revision, &v.Keep.Mode, rendered)
			if err != nil {
				return nil, err
			}
			if obj := objs[0]; kept[0].GroupVersionKind().GroupKind() != obj.GroupVersionKind().GroupKind() || kept[0].GetNamespace() != obj.GetNamespace() || kept[0].GetName() != obj.GetName() {
				t.Objects[target.Cluster] = append(slices.Clip(objs), kept...)
			}
		}
		t.DryRun[target.Cluster] = target.DryRun
	}
	if p := fp.Spec.Preview; p != nil {
		tmpl, holdBack := p.Template, p.Template == nil
		if holdBack {
			tmpl = &fp.Spec.Template
		}
		if err := AddPreview(hubID, fp, *tmpl, holdBack, placed, t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// AddPreview adds the shadow of a FleetPolicy's candidate tmpl (spec.preview's, or the version a
// rollout previews) to every placed cluster of t, compared there with the live version the
// cluster gets (none for a held cluster). holdBack ships the shadow alone, the live version
// not at all.
func AddPreview(hubID string, fp *policyhubv1.FleetPolicy, tmpl policyhubv1.PolicyTemplate, holdBack bool, placed []placement.Target, t *Targets) error {
	if err := checkTemplate(hubID, fp, tmpl); err != nil {
		return err
	}
	candidate, err := Template(FleetPolicyOwner(hubID, fp.Name), tmpl, fp.Name, nil)
	if err != nil {
		return &InvalidError{Reason: "InvalidPreview", Err: fmt.Errorf("FleetPolicy %s spec.preview: %w", fp.Name, err)}
	}
	// One shadow per live version (clusters share them, as they share the live objects).
	lists := map[*unstructured.Unstructured][]*unstructured.Unstructured{}
	for _, target := range placed {
		var live *unstructured.Unstructured
		if objs := t.Objects[target.Cluster]; len(objs) > 0 && !holdBack && !IsAdmissionPolicy(objs[0].GroupVersionKind()) {
			live = objs[0]
		}
		list, ok := lists[live]
		if !ok {
			shadow, err := Shadow(candidate, live)
			if err != nil {
				return &InvalidError{Reason: "InvalidPreview", Err: fmt.Errorf("FleetPolicy %s spec.preview: %w", fp.Name, err)}
			}
			if list = []*unstructured.Unstructured{shadow}; live != nil {
				list = append(slices.Clip(t.Objects[target.Cluster]), shadow)
			}
			lists[live] = list
		}
		t.Objects[target.Cluster] = list
		t.DryRun[target.Cluster] = target.DryRun
	}
	return nil
}

// renderVersion renders a version of the FleetPolicy's template in mode (nil: the template's
// own), with what goes beside it (an admission policy's binding), once per revision and mode:
// clusters share it. The policy is first.
func renderVersion(hubID string, fp *policyhubv1.FleetPolicy, tmpl *policyhubv1.PolicyTemplate, revision string, mode *policyhubv1.Mode, rendered map[string][]*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	key := revision + "/"
	if mode != nil {
		key += string(*mode)
	}
	if objs, ok := rendered[key]; ok {
		return objs, nil
	}
	obj, err := Template(FleetPolicyOwner(hubID, fp.Name), *tmpl, fp.Name, mode)
	if err != nil {
		return nil, &InvalidError{Reason: "InvalidTemplate", Err: fmt.Errorf("render FleetPolicy %s: %w", fp.Name, err)}
	}
	objs, err := withCompanions(obj, mode)
	if err != nil {
		return nil, &InvalidError{Reason: "InvalidTemplate", Err: fmt.Errorf("render FleetPolicy %s: %w", fp.Name, err)}
	}
	rendered[key] = objs
	return objs, nil
}

// checkTemplate refuses a FleetPolicy template its spec.allow does not let it ship: an
// exception, a kind that is no policy, a policy in the hub's namespace, or one that mutates,
// generates, deletes or verifies images without being allowed (admission refuses the first
// three; objects stored before those rules, and what admission cannot see, are refused here).
func checkTemplate(hubID string, fp *policyhubv1.FleetPolicy, tmpl policyhubv1.PolicyTemplate) error {
	obj, err := Template(FleetPolicyOwner(hubID, fp.Name), tmpl, fp.Name, nil)
	if err != nil {
		return &InvalidError{Reason: "InvalidTemplate", Err: fmt.Errorf("render FleetPolicy %s: %w", fp.Name, err)}
	}
	if err := policyhubv1.CheckAllowed(obj.Object, fp.Spec.Allow); err != nil {
		return &InvalidError{Reason: "TemplateNotAllowed", Err: fmt.Errorf("FleetPolicy %s spec.template: %w", fp.Name, err)}
	}
	return nil
}

// ApplicationPolicyTargets renders an ApplicationPolicy for the places (cluster and target
// namespace) its placement selected within its grants: per cluster, the policies of every target
// namespace there.
func ApplicationPolicyTargets(hubID string, ap *policyhubv1.ApplicationPolicy, placed []placement.AppTarget) (*Targets, error) {
	t := &Targets{
		Source:  ApplicationPolicyOwner(hubID, ap.Namespace, ap.Name).Source(),
		Objects: map[string][]*unstructured.Unstructured{}, DryRun: map[string]bool{},
	}
	var err error
	// The policies depend only on the target namespace: render them once per namespace, and share them.
	byNamespace := map[string][]*unstructured.Unstructured{}
	for _, target := range placed {
		objs, ok := byNamespace[target.Namespace]
		if !ok {
			if objs, err = ApplicationPolicy(hubID, ap, target.Namespace); err != nil {
				return nil, &InvalidError{Reason: "InvalidPolicy", Err: err}
			}
			byNamespace[target.Namespace] = objs
		}
		t.Objects[target.Cluster] = append(t.Objects[target.Cluster], objs...)
		t.DryRun[target.Cluster] = target.DryRun
	}
	return t, nil
}
