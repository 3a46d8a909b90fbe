package controllers

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/hub/render"
	"github.com/policyhub/policyhub/hub/rollout"
)

// previewCandidate is the template a FleetPolicy previews: spec.preview's (spec.template when it
// has none), or the version its rollout previews before the first wave; nil when none.
func previewCandidate(fp *policyhubv1.FleetPolicy, plan *rollout.Plan) *policyhubv1.PolicyTemplate {
	switch {
	case fp.Spec.Preview != nil && fp.Spec.Preview.Template != nil:
		return fp.Spec.Preview.Template
	case fp.Spec.Preview != nil, plan != nil && len(plan.PreviewClusters()) > 0:
		return &fp.Spec.Template
	}
	return nil
}

// previewMeasure is what the rollout's preview gate reads of the preview (nil: none).
func previewMeasure(p *policyhubv1.PreviewStatus, revision string) *rollout.Preview {
	if p == nil || p.Revision != revision {
		return nil
	}
	return &rollout.Preview{Complete: p.CompletedAt != nil, Clusters: p.Clusters, Reported: p.Reported, WouldFail: p.WouldFail, NewlyFailing: p.NewlyFailing}
}

// previewStatus is what a FleetPolicy's preview (spec.preview) has learned from its clusters'
// entries (each cluster's preview, set from its summary): the totals over the clusters that
// reported, the clusters with the most would-fail resources and the first newly failing ones,
// bounded. It starts when a candidate's revision is first seen and completes when every placed
// cluster has reported it; both moments are kept while the revision is the same, so a quiet
// fleet's preview writes nothing. nil without spec.preview.
func previewStatus(fp *policyhubv1.FleetPolicy, plan *rollout.Plan, clusters []policyhubv1.ClusterStatus, prev *policyhubv1.PreviewStatus, now time.Time) *policyhubv1.PreviewStatus {
	tmpl := previewCandidate(fp, plan)
	if tmpl == nil {
		return nil
	}
	revision, err := render.TemplateRevision(*tmpl)
	if err != nil {
		return prev // a template read from the API always encodes
	}
	name := tmpl.Metadata.Name
	if name == "" {
		name = fp.Name
	}
	at := metav1.NewTime(now.Truncate(time.Second))
	p := &policyhubv1.PreviewStatus{Revision: revision, Shadow: policyhubv1.ShadowName(name), StartedAt: &at}
	if prev != nil && prev.Revision == revision && prev.StartedAt != nil {
		p.StartedAt = prev.StartedAt
	}
	var reported []policyhubv1.ClusterPreview
	for _, c := range clusters {
		if c.Preview == nil {
			continue
		}
		p.Clusters++
		if !c.Preview.Reported {
			continue
		}
		p.Reported++
		cp := *c.Preview
		cp.Cluster = c.Name
		reported = append(reported, cp)
		p.Resources = aggregate.AddCount(p.Resources, cp.Resources)
		p.WouldFail = aggregate.AddCount(p.WouldFail, cp.WouldFail)
		p.NewlyFailing = aggregate.AddCount(p.NewlyFailing, cp.NewlyFailing)
		p.Same = aggregate.AddCount(p.Same, cp.Same)
		p.Differ = aggregate.AddCount(p.Differ, cp.Differ)
		p.OnlyShadow = aggregate.AddCount(p.OnlyShadow, cp.OnlyShadow)
		p.OnlyLive = aggregate.AddCount(p.OnlyLive, cp.OnlyLive)
	}
	if p.Clusters > 0 && p.Reported == p.Clusters {
		p.CompletedAt = &at
		if prev != nil && prev.Revision == revision && prev.CompletedAt != nil {
			p.CompletedAt = prev.CompletedAt
		}
	}
	// Clusters with the most newly failing first (then differing, then would-fail, then by
	// name): their resources are the ones named.
	slices.SortFunc(reported, func(a, b policyhubv1.ClusterPreview) int {
		return cmp.Or(cmp.Compare(b.NewlyFailing, a.NewlyFailing), cmp.Compare(b.Differing(), a.Differing()), cmp.Compare(b.WouldFail, a.WouldFail), cmp.Compare(a.Cluster, b.Cluster))
	})
	for _, cp := range reported {
		for _, r := range cp.FirstNewlyFailing {
			if len(p.FirstNewlyFailing) < policyhubv1.MaxPreviewNamed {
				p.FirstNewlyFailing = append(p.FirstNewlyFailing, policyhubv1.ClusterResource{Cluster: cp.Cluster, Resource: r})
			}
		}
		for _, d := range cp.FirstDiffering {
			if len(p.FirstDiffering) < policyhubv1.MaxPreviewNamed {
				p.FirstDiffering = append(p.FirstDiffering, policyhubv1.ClusterDifference{Cluster: cp.Cluster, VerdictDifference: d})
			}
		}
		if len(p.TopClusters) < policyhubv1.MaxPreviewClusters && (cp.WouldFail > 0 || cp.Differing() > 0) {
			cp.FirstNewlyFailing, cp.FirstDiffering = nil, nil
			p.TopClusters = append(p.TopClusters, cp)
		}
	}
	return p
}
