package aggregate

import (
	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// Shadow is a preview's shadow a declaration ships to one cluster, at the content it was
// rendered with: only the agent's results of that content count.
type Shadow struct {
	Kind, Namespace, Name string
	ContentHash           string
}

// ForShadows is a declaration's preview in one cluster, from the cluster's summary (nil: none
// yet): reported once the summary holds the results of every one of the shadows at their
// content, the counts summed over them (as AddCount sums), and up to
// MaxClusterPreviewNamed newly failing and differing resources named. A summary's shadow entry for an older
// content is not reported: the candidate changed since.
func ForShadows(s *policyhubv1.PolicyReportSummary, shadows []Shadow) policyhubv1.ClusterPreview {
	p := policyhubv1.ClusterPreview{Reported: s != nil && len(shadows) > 0}
	for _, want := range shadows {
		entry := shadowEntry(s, want)
		if entry == nil {
			p.Reported = false
			continue
		}
		p.Resources = AddCount(p.Resources, entry.Resources)
		p.WouldFail = AddCount(p.WouldFail, entry.WouldFail)
		p.NewlyFailing = AddCount(p.NewlyFailing, entry.NewlyFailing)
		p.Same = AddCount(p.Same, entry.Same)
		p.Differ = AddCount(p.Differ, entry.Differ)
		p.OnlyShadow = AddCount(p.OnlyShadow, entry.OnlyShadow)
		p.OnlyLive = AddCount(p.OnlyLive, entry.OnlyLive)
		for _, r := range entry.FirstNewlyFailing {
			if len(p.FirstNewlyFailing) == policyhubv1.MaxClusterPreviewNamed {
				break
			}
			p.FirstNewlyFailing = append(p.FirstNewlyFailing, r)
		}
		for _, d := range entry.FirstDiffering {
			if len(p.FirstDiffering) == policyhubv1.MaxClusterPreviewNamed {
				break
			}
			p.FirstDiffering = append(p.FirstDiffering, d)
		}
	}
	return p
}

// shadowEntry is the summary's entry for the shadow at its content, or nil: an entry without a
// kind matches by namespace and name, and the first entry for a shadow is the one read.
func shadowEntry(s *policyhubv1.PolicyReportSummary, want Shadow) *policyhubv1.ShadowResults {
	if s == nil {
		return nil
	}
	for i := range s.Spec.Shadows {
		e := &s.Spec.Shadows[i]
		if e.Name == want.Name && e.Namespace == want.Namespace && (e.Kind == "" || e.Kind == want.Kind) {
			if e.ContentHash != want.ContentHash {
				return nil
			}
			return e
		}
	}
	return nil
}
