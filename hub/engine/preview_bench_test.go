package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/declare"
	"github.com/policyhub/policyhub/hub/heartbeat"
	"github.com/policyhub/policyhub/hub/placement"
)

// BenchmarkSetPreviews1000 is a status pass's preview work in the engine at 1,000 clusters
// (docs/benchmarks.md, "Preview: a shadow's cost at 1,000 clusters"): setPreviews reads every
// cluster's shadow from its rendered objects, its summary's shadow entry (ten resources named of
// each list, as an agent names them) and judges it settled, setting the cluster's preview. The
// pass is the one that completes the preview: every summary was seen reportGrace after the shadow
// arrived. `make bench-preview` runs it and folds its result into its table.
func BenchmarkSetPreviews1000(b *testing.B) {
	const clusters = 1000
	fp := benchPreviewFleetPolicy(b)
	inv := placement.Inventory{}
	for i := range clusters {
		inv.Clusters = append(inv.Clusters, placement.Cluster{Name: fmt.Sprintf("cluster-%04d", i), Labels: map[string]string{"env": "prod"}})
	}
	t, _, err := declare.FleetPolicyTargets("hub-bench", fp, inv)
	if err != nil {
		b.Fatal(err)
	}
	objs := t.Objects[inv.Clusters[0].Name]
	if len(objs) != 2 || !policyhubv1.IsShadow(objs[1].GetLabels()) {
		b.Fatalf("the clusters get %d objects, want the live policy and its shadow", len(objs))
	}
	shadow := objs[1]

	now := time.Now()
	arrived := now.Add(-2 * time.Minute)
	heard := heartbeat.New(nil)
	read := SummaryRead{Summaries: map[string]*policyhubv1.PolicyReportSummary{}, Unread: map[string]bool{}, Heard: heard}
	statuses := make([]policyhubv1.ClusterStatus, 0, clusters)
	own := make([]Outcome, 0, clusters)
	for i, c := range inv.Clusters {
		s := &policyhubv1.PolicyReportSummary{ObjectMeta: metav1.ObjectMeta{Namespace: c.Name, Name: policyhubv1.SummaryName, Generation: 2}}
		s.Spec.Cluster = c.Name
		s.Spec.GeneratedAt = &metav1.Time{Time: arrived.Add(40 * time.Second)}
		s.Status.ObservedGeneration, s.Status.ObservedTime = 2, &metav1.MicroTime{Time: arrived.Add(40 * time.Second)}
		entry := policyhubv1.ShadowResults{
			Name: shadow.GetName(), Kind: shadow.GetKind(), Of: shadow.GetAnnotations()[policyhubv1.AnnotationShadowOf],
			ContentHash: shadow.GetAnnotations()[policyhubv1.AnnotationContentHash],
			Resources:   40, WouldFail: int64(10 + i%7), NewlyFailing: int64(10 + i%5), Same: 24, Differ: int64(10 + i%5), OnlyShadow: 2,
		}
		for r := range policyhubv1.MaxShadowNamed {
			ref := benchResource(r)
			entry.FirstNewlyFailing = append(entry.FirstNewlyFailing, ref)
			entry.FirstDiffering = append(entry.FirstDiffering, policyhubv1.VerdictDifference{Resource: ref, Shadow: policyhubv1.VerdictFail, Live: policyhubv1.VerdictPass})
		}
		s.Spec.Shadows = []policyhubv1.ShadowResults{entry}
		read.Summaries[c.Name] = s
		heard.Renewed(c.Name)
		synced := metav1.NewTime(arrived)
		statuses = append(statuses, policyhubv1.ClusterStatus{Name: c.Name, Phase: policyhubv1.ClusterPhaseSynced, LastSyncTime: &synced})
		own = append(own, Outcome{Cluster: c.Name, WroteAt: arrived})
	}

	var recheck time.Duration
	for b.Loop() {
		statuses, recheck = setPreviews(statuses, read, t, own, now)
	}
	b.StopTimer()
	if recheck != 0 {
		b.Fatalf("recheck in %s: a cluster was not settled", recheck)
	}
	entry, err := json.Marshal(statuses[0].Preview)
	if err != nil {
		b.Fatal(err)
	}
	if p := statuses[0].Preview; p == nil || !p.Reported || len(p.FirstNewlyFailing) != policyhubv1.MaxClusterPreviewNamed {
		b.Fatalf("cluster preview %s, want reported with %d resources named", entry, policyhubv1.MaxClusterPreviewNamed)
	}
	b.ReportMetric(float64(len(entry)), "preview-bytes/cluster")
}

// benchPreviewFleetPolicy is a FleetPolicy running a ClusterPolicy on every prod cluster while
// it previews the policy's CEL conversion (a ValidatingPolicy), as `kubectl policyhub preview
// NAME -f converted.yaml` sets it.
func benchPreviewFleetPolicy(b *testing.B) *policyhubv1.FleetPolicy {
	fp := &policyhubv1.FleetPolicy{ObjectMeta: metav1.ObjectMeta{Name: "require-team-label", UID: "5b0c5a9e-1f7e-4a4b-9d55-0c1f0e6b7a21", Generation: 3}}
	fp.Spec.Placement.ClusterSelector = &policyhubv1.ClusterSelector{MatchLabels: map[string]string{"env": "prod"}}
	fp.Spec.Template = policyhubv1.PolicyTemplate{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy",
		Spec: &runtime.RawExtension{Raw: []byte(`{"background":true,"rules":[{"name":"require-team","match":{"any":[{"resources":{"kinds":["Deployment","StatefulSet"]}}]},` +
			`"validate":{"failureAction":"Enforce","message":"a team label is required","pattern":{"metadata":{"labels":{"team":"?*"}}}}}]}`)}}
	candidate := policyhubv1.PolicyTemplate{APIVersion: "policies.kyverno.io/v1", Kind: "ValidatingPolicy",
		Spec: &runtime.RawExtension{Raw: []byte(`{"validationActions":["Deny"],"matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],` +
			`"operations":["CREATE","UPDATE"],"resources":["deployments","statefulsets"]}]},"validations":[{"expression":"has(object.metadata.labels) && 'team' in object.metadata.labels && 'cost-center' in object.metadata.labels",` +
			`"message":"team and cost-center labels are required"}]}`)}}
	fp.Spec.Preview = &policyhubv1.PreviewSpec{Template: &candidate}
	return fp
}

// benchResource is the r-th resource a shadow names: a Deployment of a team's namespace, with a
// name of a real one's length.
func benchResource(r int) policyhubv1.ResourceRef {
	teams := []string{"payments", "checkout", "search", "catalog", "identity"}
	return policyhubv1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-" + teams[r%len(teams)] + "-prod",
		Name: fmt.Sprintf("%s-api-gateway-%02d", teams[r%len(teams)], r)}
}
