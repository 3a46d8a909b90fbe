package declare

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/placement"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/rollout"
	"github.com/policyhub/policyhub/hub/source"
)

// Lifecycle is what a declaration's lifecycle lets it want.
type Lifecycle int

const (
	// Sync: its targets, and a prune where it was and no longer is placed (with prune on).
	Sync Lifecycle = iota
	// PruneAll: being deleted with prune on: nothing anywhere it was synced.
	PruneAll
	// Keep: suspended, or deleted with prune off: the clusters keep what they have.
	Keep
)

// LifecycleOf decides a declaration's lifecycle, and says why in words for a user.
func LifecycleOf(deleting, suspended, prune bool) (Lifecycle, string) {
	switch {
	case deleting && !prune:
		return Keep, "being deleted with prune off: its policies stay in the clusters"
	case deleting:
		return PruneAll, "being deleted: its policies are pruned from the clusters it was synced to"
	case suspended:
		return Keep, "suspended: not synced; the policies in the clusters are left as they are"
	}
	return Sync, ""
}

// Prune is a declaration's spec.prune: on unless set off.
func Prune(prune *bool) bool { return prune == nil || *prune }

// FleetPolicyTargets runs a FleetPolicy down the flow — place, rollout, render — as the hub syncs
// it and as `kubectl policyhub sync --dry-run` previews it; it returns the rollout plan too (nil
// without a rollout).
func FleetPolicyTargets(hubID string, fp *policyhubv1.FleetPolicy, inv placement.Inventory) (*render.Targets, *rollout.Plan, error) {
	sel, err := placement.FleetPolicy(fp.Spec, inv)
	if err != nil {
		return nil, nil, &render.InvalidError{Reason: "InvalidPlacement", Err: err}
	}
	var plan *rollout.Plan
	var versions map[string]render.Version // nil: no rollout, every placed cluster gets the spec
	if fp.Spec.Rollout != nil {
		placed := make([]string, 0, len(sel.Targets))
		for _, target := range sel.Targets {
			placed = append(placed, target.Cluster)
		}
		if plan, err = rollout.NewPlan(fp, placed, inv); err != nil {
			return nil, nil, &render.InvalidError{Reason: "InvalidRollout", Err: err}
		}
		versions = plan.Versions()
	}
	t, err := render.FleetPolicyTargets(hubID, fp, sel.Targets, versions)
	if err != nil {
		return nil, plan, err
	}
	if previewed := previewTargets(plan, sel.Targets); len(previewed) > 0 && fp.Spec.Preview == nil {
		// The rollout's preview gate: the version's shadow beside what each cluster runs.
		if err := render.AddPreview(hubID, fp, fp.Spec.Template, false, previewed, t); err != nil {
			return nil, plan, err
		}
	}
	t.Unknown = sel.Unknown
	t.MissingPlacement = placement.MissingPlacement(fp.Spec.Placement, inv, "", "spec.placement")
	return t, plan, nil
}

// previewTargets are the placed clusters the rollout's preview gate previews its version in.
func previewTargets(plan *rollout.Plan, placed []placement.Target) []placement.Target {
	if plan == nil {
		return nil
	}
	clusters := plan.PreviewClusters()
	if len(clusters) == 0 {
		return nil
	}
	in := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		in[c] = true
	}
	var out []placement.Target
	for _, target := range placed {
		if in[target.Cluster] {
			out = append(out, target)
		}
	}
	return out
}

// PolicySetTargets runs a PolicySet down the flow — select its members from the source's
// policies, place, rollout, render — as the hub syncs it and as `kubectl policyhub sync
// --dry-run` previews it: current is the version read from its source, stable (nil when not at
// hand) the last version that completed its rollout. It returns the members selected of current,
// and the rollout plan (nil without a rollout).
func PolicySetTargets(hubID string, ps *policyhubv1.PolicySet, current, stable *source.Artifact, inv placement.Inventory) (*render.Targets, []*unstructured.Unstructured, *rollout.Plan, error) {
	members, err := source.Select(current.Policies, ps.Spec.Select)
	if err != nil {
		return nil, nil, nil, &render.InvalidError{Reason: "InvalidSelect", Err: err}
	}
	sel, err := placement.PolicySet(ps.Spec, inv)
	if err != nil {
		return nil, nil, nil, &render.InvalidError{Reason: "InvalidPlacement", Err: err}
	}
	now := render.SetVersion{Revision: current.Digest, Members: members}
	var before render.SetVersion
	var plan *rollout.Plan
	var choices map[string]render.SetChoice // nil: no rollout, every placed cluster gets now
	if ps.Spec.Rollout != nil {
		placed := make([]string, 0, len(sel.Targets))
		for _, target := range sel.Targets {
			placed = append(placed, target.Cluster)
		}
		if plan, err = rollout.Rollout(source.Revision(current.Digest), ps.Spec.Rollout, ps.Status.Rollout, placed, inv); err != nil {
			return nil, nil, nil, &render.InvalidError{Reason: "InvalidRollout", Err: err}
		}
		choices = map[string]render.SetChoice{}
		for c, a := range plan.Assignments() {
			choices[c] = render.SetChoice{Stable: a.Stable, Mode: a.Mode}
		}
		if plan.Stable() != nil && stable != nil {
			kept, err := source.Select(stable.Policies, ps.Spec.Select)
			if err != nil {
				return nil, nil, nil, &render.InvalidError{Reason: "InvalidSelect", Err: err}
			}
			before = render.SetVersion{Revision: stable.Digest, Members: kept}
		}
	}
	t, err := render.PolicySetTargets(hubID, ps, now, before, sel.Targets, choices)
	if err != nil {
		return nil, nil, plan, err
	}
	t.Unknown = sel.Unknown
	t.MissingPlacement = placement.MissingPlacement(ps.Spec.Placement, inv, "", "spec.placement")
	return t, members, plan, nil
}

// KubeVelaApplication reads the KubeVela Application an ApplicationPolicy is about: nil when
// it names none, the hub does not serve KubeVela's Application, or it does not exist.
func KubeVelaApplication(ctx context.Context, reader client.Reader, ap *policyhubv1.ApplicationPolicy) (*unstructured.Unstructured, error) {
	if ap.Spec.Application == "" {
		return nil, nil
	}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(policyhubv1.KubeVelaApplicationGVK)
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ap.Namespace, Name: ap.Spec.Application}, app); err != nil {
		if client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read application %s/%s: %w", ap.Namespace, ap.Spec.Application, err)
	}
	return app, nil
}

// ApplicationPolicyTargets places and renders an ApplicationPolicy: by its placement, else by
// its KubeVela Application's topology policies (app, nil when there is none), within what the
// hub admin granted its namespace.
func ApplicationPolicyTargets(hubID string, ap *policyhubv1.ApplicationPolicy, app *unstructured.Unstructured, inv placement.Inventory, grants placement.Grants) (*render.Targets, error) {
	reach, err := placement.ReachOf(grants, inv)
	if err != nil {
		return nil, &render.InvalidError{Reason: "InvalidGrant", Err: err}
	}
	var topologies []placement.Topology
	if app != nil && ap.Spec.Placement == nil {
		if topologies, err = placement.Topologies(app); err != nil {
			return nil, &render.InvalidError{Reason: "InvalidPlacement", Err: err}
		}
	}
	sel, err := placement.ApplicationPolicy(ap, topologies, inv, reach)
	if err != nil {
		return nil, &render.InvalidError{Reason: "InvalidPlacement", Err: err}
	}
	t, err := render.ApplicationPolicyTargets(hubID, ap, sel.Targets)
	if err != nil {
		return nil, err
	}
	t.Unknown = sel.Unknown
	for _, ng := range sel.NotGranted {
		t.NotGranted = append(t.NotGranted, ng.Cluster+"/"+ng.Namespace)
	}
	if ap.Spec.Placement != nil {
		t.MissingPlacement = placement.MissingPlacement(*ap.Spec.Placement, inv, ap.Namespace, "spec.placement")
	}
	return t, nil
}

// Leaving are the clusters a declaration's status lists that its targets (placed objects by
// cluster; nil for none) no longer place it on: with prune on, it is pruned there.
func Leaving(status []policyhubv1.ClusterStatus, placed map[string][]*unstructured.Unstructured) []string {
	var out []string
	for _, c := range status {
		if _, still := placed[c.Name]; !still {
			out = append(out, c.Name)
		}
	}
	return out
}
