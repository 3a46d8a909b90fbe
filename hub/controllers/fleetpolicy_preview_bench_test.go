package controllers

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// BenchmarkPreviewStatus1000 is a status pass's preview work in the FleetPolicy controller at
// 1,000 clusters (docs/benchmarks.md, "Preview: a shadow's cost at 1,000 clusters"):
// previewStatus sums the clusters' previews (each as setPreviews leaves it in the cluster's
// entry: counts, three resources named of each list), orders the clusters that reported and
// names the bounded few. Every cluster has reported and the previous status is the same
// candidate's, complete: the pass a quiet fleet makes, which must leave the status as it was.
// The status.preview it makes is reported in JSON bytes. `make bench-preview` runs it and folds
// its result into its table.
func BenchmarkPreviewStatus1000(b *testing.B) {
	const clusters = 1000
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "require-team-label"}}
	fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy",
		Spec: &runtime.RawExtension{Raw: []byte(`{"background":true,"rules":[{"name":"require-team","match":{"any":[{"resources":{"kinds":["Deployment","StatefulSet"]}}]},` +
			`"validate":{"failureAction":"Enforce","message":"a team label is required","pattern":{"metadata":{"labels":{"team":"?*"}}}}}]}`)}}
	candidate := policyhubv1.PolicyTemplate{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy",
		Spec: &runtime.RawExtension{Raw: []byte(`{"validationActions":["Deny"],"matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],` +
			`"operations":["CREATE","UPDATE"],"resources":["deployments","statefulsets"]}]},"validations":[{"expression":"has(object.metadata.labels) && 'team' in object.metadata.labels && 'cost-center' in object.metadata.labels",` +
			`"message":"team and cost-center labels are required"}]}`)}}
	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: &candidate}

	teams := []string{"payments", "checkout", "search", "catalog", "identity"}
	statuses := make([]policyhubv1.ClusterStatus, 0, clusters)
	for i := range clusters {
		p := &policyhubv1.ClusterPreview{Reported: true, Resources: 40, WouldFail: int64(10 + i%7), NewlyFailing: int64(10 + i%5), Same: 24, Differ: int64(10 + i%5), OnlyShadow: 2}
		for r := range policyhubv1.MaxClusterPreviewNamed {
			team := teams[(i+r)%len(teams)]
			ref := policyhubv1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-" + team + "-prod", Name: fmt.Sprintf("%s-api-gateway-%02d", team, r)}
			p.FirstNewlyFailing = append(p.FirstNewlyFailing, ref)
			p.FirstDiffering = append(p.FirstDiffering, policyhubv1.VerdictDifference{Resource: ref, Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass})
		}
		statuses = append(statuses, policyhubv1.ClusterStatus{Name: fmt.Sprintf("cluster-%04d", i), Phase: policyhubv1.ClusterPhaseSynced, Preview: p})
	}
	completed := time.Now().Add(-time.Minute)
	prev := previewStatus(fp, nil, statuses, nil, completed)
	if prev == nil || prev.CompletedAt == nil {
		b.Fatal("the preview did not complete")
	}

	now := time.Now()
	var p *policyhubv1.PreviewStatus
	for b.Loop() {
		p = previewStatus(fp, nil, statuses, prev, now)
	}
	b.StopTimer()
	if !p.CompletedAt.Equal(prev.CompletedAt) || p.Reported != clusters || len(p.TopClusters) != policyhubv1.MaxPreviewClusters ||
		len(p.FirstNewlyFailing) != policyhubv1.MaxPreviewNamed || len(p.FirstDiffering) != policyhubv1.MaxPreviewNamed {
		b.Fatalf("preview of %d reported, completed %v (was %v), %d top clusters, %d and %d named: want all, the same moment, the bounds",
			p.Reported, p.CompletedAt, prev.CompletedAt, len(p.TopClusters), len(p.FirstNewlyFailing), len(p.FirstDiffering))
	}
	data, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data)), "status-preview-bytes")
}
