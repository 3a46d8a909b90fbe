package aggregate

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

func TestForShadowsReadsOnlyTheShippedContent(t *testing.T) {
	shadow := Shadow{Kind: "ValidatingPolicy", Name: "policyhub-shadow-p", ContentHash: "sha256:new"}
	web := policyhubv1.ResourceRef{Kind: "Deployment", Namespace: "shop", Name: "web"}
	entry := func(hash string, wouldFail int64) policyhubv1.ShadowResults {
		return policyhubv1.ShadowResults{Name: shadow.Name, Kind: shadow.Kind, ContentHash: hash, Resources: 4, WouldFail: wouldFail, NewlyFailing: 1, Same: 2, Differ: 1, OnlyShadow: 1,
			FirstNewlyFailing: []policyhubv1.ResourceRef{web, web, web, web}}
	}
	summary := func(entries ...policyhubv1.ShadowResults) *policyhubv1.PolicyReportSummary {
		return &policyhubv1.PolicyReportSummary{Spec: policyhubv1.PolicyReportSummarySpec{Shadows: entries}}
	}
	for _, tc := range []struct {
		name    string
		summary *policyhubv1.PolicyReportSummary
		shadows []Shadow
		want    policyhubv1.ClusterPreview
	}{
		{"no summary yet", nil, []Shadow{shadow}, policyhubv1.ClusterPreview{}},
		{"no entry yet", summary(), []Shadow{shadow}, policyhubv1.ClusterPreview{}},
		{"an older candidate's results", summary(entry("sha256:old", 3)), []Shadow{shadow}, policyhubv1.ClusterPreview{}},
		{"this candidate's results", summary(entry("sha256:new", 3)), []Shadow{shadow},
			policyhubv1.ClusterPreview{Reported: true, Resources: 4, WouldFail: 3, NewlyFailing: 1, Same: 2, Differ: 1, OnlyShadow: 1, FirstNewlyFailing: []policyhubv1.ResourceRef{web, web, web}}},
		{"a hostile count stops at the largest", summary(entry("sha256:new", math.MaxInt64), func() policyhubv1.ShadowResults {
			e := entry("sha256:b", math.MaxInt64)
			e.Name = "policyhub-shadow-q"
			return e
		}()), []Shadow{shadow, {Kind: "ValidatingPolicy", Name: "policyhub-shadow-q", ContentHash: "sha256:b"}},
			policyhubv1.ClusterPreview{Reported: true, Resources: 8, WouldFail: math.MaxInt64, NewlyFailing: 2, Same: 4, Differ: 2, OnlyShadow: 2, FirstNewlyFailing: []policyhubv1.ResourceRef{web, web, web}}},
		{"one of two shadows missing", summary(entry("sha256:new", 3)), []Shadow{shadow, {Kind: "ValidatingPolicy", Name: "policyhub-shadow-q"}},
			policyhubv1.ClusterPreview{Resources: 4, WouldFail: 3, NewlyFailing: 1, Same: 2, Differ: 1, OnlyShadow: 1, FirstNewlyFailing: []policyhubv1.ResourceRef{web, web, web}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ForShadows(tc.summary, tc.shadows)); diff != "" {
				t.Errorf("ForShadows (-want +got):\n%s", diff)
			}
		})
	}
}
