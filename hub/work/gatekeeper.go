package work

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Gatekeeper in a cluster's pass. A ConstraintTemplate makes its Constraint kind: Gatekeeper
// creates that kind's CRD once it has compiled the template, a second or two after the template
// is written. So within a pass templates are written before Constraints and pruned after them
// (writeStage); a Constraint whose kind is not served yet while Gatekeeper runs is Pending and
// retried with the worker's bounded backoff (gatekeeperMissing), and only a cluster without
// Gatekeeper at all is Unsupported, not retried until something changes.

var gatekeeperTemplateGVK = schema.GroupVersionKind{Group: policyhubv1.GatekeeperTemplateGroup, Version: "v1", Kind: "ConstraintTemplate"}

func isGatekeeperGroup(group string) bool {
	return group == policyhubv1.GatekeeperTemplateGroup || group == policyhubv1.GatekeeperConstraintGroup
}

// writeStage orders a pass's writes to one cluster: templates (and everything else) first, then
// the Constraints they make; Constraints pruned before the templates that make them (Gatekeeper
// deletes a template's CRD, and with it every Constraint of its kind, when the template goes).
func writeStage(c *change) int {
	obj := c.desired
	if c.action == ActionDelete {
		obj = c.live
	}
	if obj == nil {
		return 0
	}
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Group == policyhubv1.GatekeeperConstraintGroup && c.action != ActionDelete:
		return 1
	case gvk.Group == policyhubv1.GatekeeperTemplateGroup && c.action == ActionDelete:
		return 2
	}
	return 0
}

// withoutUnservedConstraints is d without its Constraints of kinds the cluster does not serve
// (mapper's answer); mixed is false when d has none, or nothing else. No object of a kind the
// cluster does not serve can exist there, so leaving them out prunes nothing.
func withoutUnservedConstraints(d Declaration, mapper meta.RESTMapper) (rest Declaration, mixed bool) {
	rest = d
	rest.Objects = make([]*unstructured.Unstructured, 0, len(d.Objects))
	for _, obj := range d.Objects {
		gvk := obj.GroupVersionKind()
		if gvk.Group == policyhubv1.GatekeeperConstraintGroup {
			if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				continue
			}
		}
		rest.Objects = append(rest.Objects, obj)
	}
	if len(rest.Objects) == 0 || len(rest.Objects) == len(d.Objects) {
		return d, false
	}
	return rest, true
}

// writeStages is how many stages writeStage has.
const writeStages = 3

// gatekeeperMissing says why the cluster cannot take the Gatekeeper kinds among missing (those
// its discovery lacks): Gatekeeper does not run there (templates.gatekeeper.sh not served:
// Unsupported, pending false), or it runs but has not made a Constraint kind (yet): pending
// true, retried: its template was written a moment ago (Gatekeeper makes the kind's CRD once it
// has compiled it), or is yet to come. "" when none of missing is Gatekeeper's, or every
// Constraint kind is served once the cluster's discovery is asked again. The message is the same
// from one retry to the next: a status that churned with each would cost the hub writes.
func gatekeeperMissing(cluster string, missing []schema.GroupVersionKind, serves func(schema.GroupVersionKind) (bool, error), refresh func(group string) error) (string, bool, error) {
	var kinds []schema.GroupVersionKind
	for _, gvk := range missing {
		if isGatekeeperGroup(gvk.Group) {
			kinds = append(kinds, gvk)
		}
	}
	if len(kinds) == 0 {
		return "", false, nil
	}
	gatekeeper, err := serves(gatekeeperTemplateGVK)
	if err != nil {
		return "", false, err
	}
	if !gatekeeper {
		names := make([]string, len(kinds))
		for i, gvk := range kinds {
			names[i] = gvk.GroupVersion().String() + " " + gvk.Kind
		}
		slices.Sort(names)
		return fmt.Sprintf("cluster %s does not run the Gatekeeper engine (it does not serve %s): install Gatekeeper to enforce %s; nothing was sent",
			cluster, gatekeeperTemplateGVK.GroupVersion(), strings.Join(slices.Compact(names), ", ")), false, nil
	}
	// Gatekeeper runs: the Constraint kinds may have been made since the cluster's discovery
	// was last asked (a template written a moment ago).
	if refresh != nil {
		if err := refresh(policyhubv1.GatekeeperConstraintGroup); err != nil {
			return "", false, err
		}
	}
	var waiting []string
	for _, gvk := range kinds {
		ok, err := serves(gvk)
		if err != nil {
			return "", false, err
		}
		if ok {
			continue
		}
		if gvk.Group != policyhubv1.GatekeeperConstraintGroup {
			// A template version Gatekeeper does not serve: no wait makes it.
			return fmt.Sprintf("cluster %s does not serve %s %s: upgrade Gatekeeper to a version that serves it; nothing was sent", cluster, gvk.GroupVersion(), gvk.Kind), false, nil
		}
		waiting = append(waiting, gvk.Kind)
	}
	if len(waiting) == 0 {
		return "", false, nil
	}
	slices.Sort(waiting)
	return fmt.Sprintf("cluster %s: Gatekeeper does not serve the Constraint kind %s yet: it makes a kind from the ConstraintTemplate that names it, once compiled (ship the template to the cluster too); retried with backoff, nothing of it was sent",
		cluster, strings.Join(waiting, ", ")), true, nil
}

// gatekeeperReady reads Gatekeeper's word on a template or a Constraint from its status, which
// Gatekeeper's status operation sums up from every Gatekeeper pod (byPod): a template is in
// force once it is created (its Constraint CRD made) and no pod has an error for it, a
// Constraint once every pod says enforced; either at the object's generation (an older word is
// about an older spec). A Constraint's errors do not count against it once enforced: Gatekeeper
// 3.23 puts there its failure to make a ValidatingAdmissionPolicyBinding for the Constraint (the
// vap.k8s.io enforcement point, which the hub never asks for: generateVAP is refused), while its
// webhook and audit enforce it. known is false while no pod has said anything.
func gatekeeperReady(u *unstructured.Unstructured) (ready, known bool) {
	status, ok := u.Object["status"].(map[string]any)
	if !ok {
		return false, false
	}
	byPod, _ := status["byPod"].([]any)
	template := u.GroupVersionKind().Group == policyhubv1.GatekeeperTemplateGroup
	created, createdKnown := status["created"].(bool)
	if len(byPod) == 0 && (!template || !createdKnown) {
		return false, false
	}
	ready = !template || created
	if !template && len(byPod) == 0 {
		ready = false
	}
	generation := u.GetGeneration()
	for _, p := range byPod {
		pod, ok := p.(map[string]any)
		if !ok {
			return false, true
		}
		if errs, _ := pod["errors"].([]any); len(errs) > 0 && template {
			ready = false
		}
		if observed, ok := pod["observedGeneration"].(int64); ok && generation > 0 && observed < generation {
			ready = false
		}
		if !template {
			if enforced, _ := pod["enforced"].(bool); !enforced {
				ready = false
			}
		}
	}
	return ready, true
}
