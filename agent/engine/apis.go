package engine

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// PolicyGroups are the API groups of Kyverno's policies: the legacy kinds' and the CEL kinds'.
var PolicyGroups = []string{"kyverno.io", "policies.kyverno.io"}

// PolicyAPIs returns the group/versions of PolicyGroups among the served groups: sorted,
// without repeats, at most policyhubv1.MaxSummaryPolicyAPIs (a cluster is not trusted to serve a
// reasonable number of versions).
func PolicyAPIs(groups *metav1.APIGroupList) []string {
	if groups == nil {
		return nil
	}
	var apis []string
	for _, g := range groups.Groups {
		if !slices.Contains(PolicyGroups, g.Name) {
			continue
		}
		for _, v := range g.Versions {
			if v.GroupVersion != "" && len(v.GroupVersion) <= policyhubv1.MaxSummaryPolicyAPILength {
				apis = append(apis, v.GroupVersion)
			}
		}
	}
	slices.Sort(apis)
	apis = slices.Compact(apis)
	if len(apis) > policyhubv1.MaxSummaryPolicyAPIs {
		apis = apis[:policyhubv1.MaxSummaryPolicyAPIs]
	}
	return apis
}
