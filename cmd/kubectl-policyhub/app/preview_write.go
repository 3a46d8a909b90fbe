package app

import (
	"cmp"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/render"
)

// previewStarted is `preview NAME -f FILE`'s -o json|yaml without --wait.
type previewStarted struct {
	FleetPolicy string `json:"fleetPolicy"`
	// Candidate is the candidate's Kind/name.
	Candidate string `json:"candidate"`
	// Revision is the candidate's template revision (status.preview.revision once the hub has
	// started it).
	Revision string `json:"revision"`
	// Shadow is the shadow's name in the clusters.
	Shadow string `json:"shadow"`
	// Generation is the FleetPolicy's generation with this candidate.
	Generation int64 `json:"generation"`
	// Changed is false when spec.preview already held this candidate.
	Changed bool `json:"changed"`
	// Replaced is the revision of the candidate this one replaced, if any.
	Replaced string `json:"replaced,omitempty"`
}

func (r *previewStarted) String() string {
	s := fmt.Sprintf("fleetpolicy/%s: previewing %s (revision %s, shadow %s)", r.FleetPolicy, r.Candidate, r.Revision, r.Shadow)
	if r.Replaced != "" {
		s += ", replacing revision " + r.Replaced
	}
	return s + unchanged(r.Changed)
}

// nextStep says how to read the preview just started.
func (r *previewStarted) nextStep() string {
	return fmt.Sprintf("Its results come as each cluster's agent reports: `kubectl policyhub preview %s` shows them, with --wait once every cluster reported.", r.FleetPolicy)
}

// withPreview is fp with spec.preview.template set to tmpl.
func withPreview(fp *policyhubv1.FleetPolicy, tmpl policyhubv1.PolicyTemplate) *policyhubv1.FleetPolicy {
	out := fp.DeepCopy()
	t := *tmpl.DeepCopy()
	out.Spec.Preview = &policyhubv1.PreviewSpec{Template: &t}
	return out
}

// startPreview sets spec.preview.template of FleetPolicy name to tmpl and returns what it did and
// the FleetPolicy as the API server stored it.
func startPreview(ctx context.Context, c client.Client, name string, tmpl policyhubv1.PolicyTemplate) (*previewStarted, *policyhubv1.FleetPolicy, error) {
	var res *previewStarted
	var stored *policyhubv1.FleetPolicy
	// The patch carries the resourceVersion it was computed from: a candidate written meanwhile
	// by someone else is replaced knowingly (recomputed), never merged with this one.
	err := retry.RetryOnConflict(rolloutRetry, func() error {
		fp, err := getFleetPolicy(ctx, c, name)
		if err != nil {
			return err
		}
		res = &previewStarted{FleetPolicy: name, Candidate: templateText(tmpl, name), Shadow: policyhubv1.ShadowName(cmp.Or(tmpl.Metadata.Name, name))}
		if fp.Spec.Preview != nil && fp.Spec.Preview.Template != nil {
			if res.Replaced, err = render.TemplateRevision(*fp.Spec.Preview.Template); err != nil {
				return fmt.Errorf("FleetPolicy %s: spec.preview.template: %w", name, err)
			}
		}
		patched := withPreview(fp, tmpl)
		if err := c.Patch(ctx, patched, client.MergeFromWithOptions(fp, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			// The API server's own words: it names the field it refuses and why (e.g.
			// spec.rollout.previewGate, a namespaced kind without a namespace).
			return fmt.Errorf("set spec.preview of FleetPolicy %s: %w", name, err)
		}
		stored = patched
		res.Generation, res.Changed = patched.Generation, patched.Generation != fp.Generation
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, nil, fmt.Errorf("set spec.preview of FleetPolicy %s: the object kept changing meanwhile, try again: %w", name, err)
	}
	if err != nil {
		return nil, nil, err
	}
	if stored.Spec.Preview == nil || stored.Spec.Preview.Template == nil {
		return nil, nil, fmt.Errorf("set spec.preview of FleetPolicy %s: the API server kept no spec.preview.template (is the hub's CRD older than this CLI?)", name)
	}
	// The revision of the candidate as stored: the one the hub computes and status.preview names.
	if res.Revision, err = render.TemplateRevision(*stored.Spec.Preview.Template); err != nil {
		return nil, nil, fmt.Errorf("FleetPolicy %s: spec.preview.template: %w", name, err)
	}
	if res.Replaced == res.Revision {
		res.Replaced = ""
	}
	return res, stored, nil
}

// --- end ---

// previewEnded is `preview NAME --end`'s -o json|yaml.
type previewEnded struct {
	FleetPolicy string `json:"fleetPolicy"`
	// Ended is false when there was no spec.preview to remove.
	Ended bool `json:"ended"`
	// HeldBack is true when spec.preview had no template: spec.template was held back, and now
	// ships to the clusters.
	HeldBack bool `json:"heldBack,omitempty"`
	// Gate is true when the FleetPolicy's rollout has a preview gate, which previews by itself.
	Gate bool `json:"gate,omitempty"`
}

func (r *previewEnded) String() string {
	switch {
	case !r.Ended && r.Gate:
		return fmt.Sprintf("fleetpolicy/%s has no spec.preview: nothing to end (its rollout previews each new version itself, spec.rollout.previewGate)", r.FleetPolicy)
	case !r.Ended:
		return fmt.Sprintf("fleetpolicy/%s has no spec.preview: nothing to end", r.FleetPolicy)
	case r.HeldBack:
		return fmt.Sprintf("fleetpolicy/%s: preview ended (spec.preview removed): the hub removes the shadows, and spec.template, held back during the preview, now ships to the clusters", r.FleetPolicy)
	}
	return fmt.Sprintf("fleetpolicy/%s: preview ended (spec.preview removed): the hub removes the shadows", r.FleetPolicy)
}

// endPreview removes spec.preview of FleetPolicy name.
func endPreview(ctx context.Context, c client.Client, name string) (*previewEnded, error) {
	var res *previewEnded
	// Conditional on the resourceVersion read, so that what the command says it removed (a held
	// back spec.template now ships) is what it removed.
	err := retry.RetryOnConflict(rolloutRetry, func() error {
		fp, err := getFleetPolicy(ctx, c, name)
		if err != nil {
			return err
		}
		res = &previewEnded{FleetPolicy: name, Gate: fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil}
		if fp.Spec.Preview == nil {
			return nil
		}
		res.HeldBack = fp.Spec.Preview.Template == nil
		patched := fp.DeepCopy()
		patched.Spec.Preview = nil
		if err := c.Patch(ctx, patched, client.MergeFromWithOptions(fp, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("remove spec.preview of FleetPolicy %s: %w", name, err)
		}
		res.Ended = true
		return nil
	})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("remove spec.preview of FleetPolicy %s: the object kept changing meanwhile, try again: %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
