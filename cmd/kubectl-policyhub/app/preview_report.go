package app

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
)

// previewReport is `preview`'s -o json|yaml: a FleetPolicy's preview and every cluster's part.
// Every count is always printed.
type previewReport struct {
	FleetPolicy string `json:"fleetPolicy"`
	// Candidate says where the candidate is (spec.preview.template, or spec.template).
	Candidate string `json:"candidate"`
	// CandidateRevision is the revision of the candidate the FleetPolicy holds now.
	CandidateRevision string `json:"candidateRevision"`
	// UpToDate is false while the results are of an older spec or candidate (the hub has not
	// processed the latest), or not started.
	UpToDate bool `json:"upToDate"`
	// Revision is the revision the results are of (status.preview.revision); empty before the hub
	// started the preview.
	Revision    string       `json:"revision"`
	Shadow      string       `json:"shadow"`
	StartedAt   *metav1.Time `json:"startedAt,omitempty"`
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Complete: every placed cluster reported the candidate's results.
	Complete bool `json:"complete"`
	// Clusters the shadow is placed in, Reported those that reported; the totals are theirs.
	Clusters     int32 `json:"clusters"`
	Reported     int32 `json:"reported"`
	Resources    int64 `json:"resources"`
	WouldFail    int64 `json:"wouldFail"`
	NewlyFailing int64 `json:"newlyFailing"`
	Same         int64 `json:"same"`
	Differ       int64 `json:"differ"`
	OnlyShadow   int64 `json:"onlyShadow"`
	OnlyLive     int64 `json:"onlyLive"`
	// Gate is the rollout's preview gate, when the rollout previews.
	Gate *policyhubv1.PreviewGate `json:"gate,omitempty"`
	// PerCluster is every cluster of the preview, most newly failing first, then by name.
	PerCluster []previewCluster `json:"perCluster"`
	// FirstNewlyFailing names the fleet's first newly failing resources (at most 20).
	FirstNewlyFailing []previewResource `json:"firstNewlyFailing"`
	// FirstDiffering names resources the candidate and the running version judge differently,
	// with both verdicts (at most 20).
	FirstDiffering []previewDifference `json:"firstDiffering"`

	// generation and observed are the FleetPolicy's, for the table's note.
	generation, observed int64
}

// previewCluster is the preview in one cluster.
type previewCluster struct {
	Name string `json:"name"`
	// Reported: the cluster's agent reported the candidate's results; the counts are 0 until then.
	Reported          bool          `json:"reported"`
	Resources         int64         `json:"resources"`
	WouldFail         int64         `json:"wouldFail"`
	NewlyFailing      int64         `json:"newlyFailing"`
	Differ            int64         `json:"differ"`
	FirstNewlyFailing []resourceRef `json:"firstNewlyFailing,omitempty"`
}

// previewResource is a newly failing resource in a cluster.
type previewResource struct {
	Cluster    string `json:"cluster"`
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// previewDifference is a resource of a cluster the candidate (shadow) and the running version
// (live) judge differently.
type previewDifference struct {
	previewResource
	Shadow policyhubv1.Verdict `json:"shadow"`
	Live   policyhubv1.Verdict `json:"live"`
}

// buildPreviewReport is fp's preview, with each cluster's part from its state (its
// ClusterStatusSlices entry); clusters without a preview entry are not the preview's.
func buildPreviewReport(fp *policyhubv1.FleetPolicy, clusters []policyhubv1.ClusterStatus) *previewReport {
	r := &previewReport{FleetPolicy: fp.Name, PerCluster: []previewCluster{}, FirstNewlyFailing: []previewResource{}, FirstDiffering: []previewDifference{},
		generation: fp.Generation, observed: fp.Status.ObservedGeneration}
	if t, err := previewTargetOf(fp); err == nil {
		r.Candidate, r.CandidateRevision = t.candidate, t.revision
	}
	if fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil && fp.Spec.Preview == nil {
		r.Gate = fp.Spec.Rollout.PreviewGate.DeepCopy()
	}
	p := fp.Status.Preview
	if p == nil {
		return r
	}
	r.Revision, r.Shadow, r.StartedAt, r.CompletedAt = p.Revision, p.Shadow, p.StartedAt, p.CompletedAt
	r.Complete = p.CompletedAt != nil
	r.UpToDate = fp.Status.ObservedGeneration >= fp.Generation && p.Revision == r.CandidateRevision
	r.Clusters, r.Reported = p.Clusters, p.Reported
	r.Resources, r.WouldFail, r.NewlyFailing = p.Resources, p.WouldFail, p.NewlyFailing
	r.Same, r.Differ, r.OnlyShadow, r.OnlyLive = p.Same, p.Differ, p.OnlyShadow, p.OnlyLive
	for _, c := range clusters {
		if c.Preview == nil {
			continue
		}
		row := previewCluster{Name: c.Name, Reported: c.Preview.Reported}
		if row.Reported {
			row.Resources, row.WouldFail, row.NewlyFailing, row.Differ = c.Preview.Resources, c.Preview.WouldFail, c.Preview.NewlyFailing, c.Preview.Differing()
			for _, ref := range c.Preview.FirstNewlyFailing {
				row.FirstNewlyFailing = append(row.FirstNewlyFailing, toResourceRef(ref))
			}
		}
		r.PerCluster = append(r.PerCluster, row)
	}
	slices.SortFunc(r.PerCluster, func(a, b previewCluster) int {
		return cmp.Or(cmp.Compare(b.NewlyFailing, a.NewlyFailing), strings.Compare(a.Name, b.Name))
	})
	for _, cr := range p.FirstNewlyFailing {
		r.FirstNewlyFailing = append(r.FirstNewlyFailing, previewResource{Cluster: cr.Cluster, APIVersion: cr.Resource.APIVersion,
			Kind: cr.Resource.Kind, Namespace: cr.Resource.Namespace, Name: cr.Resource.Name})
	}
	for _, d := range p.FirstDiffering {
		r.FirstDiffering = append(r.FirstDiffering, previewDifference{Shadow: d.Shadow, Live: d.Live, previewResource: previewResource{Cluster: d.Cluster,
			APIVersion: d.Resource.APIVersion, Kind: d.Resource.Kind, Namespace: d.Resource.Namespace, Name: d.Resource.Name}})
	}
	return r
}

// parity is the candidate's verdicts compared with the running version's, "" when all are 0.
func (r *previewReport) parity() string {
	if r.Same == 0 && r.Differ == 0 && r.OnlyShadow == 0 && r.OnlyLive == 0 {
		return ""
	}
	return fmt.Sprintf("same %d, differ %d, only shadow %d, only live %d", r.Same, r.Differ, r.OnlyShadow, r.OnlyLive)
}

// printPreview prints the report as a header, a table of the clusters and the first newly
// failing resources; ages are taken at now.
func printPreview(w io.Writer, r *previewReport, now time.Time) {
	tableRow(w, "FleetPolicy:", r.FleetPolicy)
	tableRow(w, "Candidate:", fmt.Sprintf("revision %s, %s", r.CandidateRevision, r.Candidate))
	if g := r.Gate; g != nil {
		var bounds []string
		if g.MaxWouldFail != nil {
			bounds = append(bounds, fmt.Sprintf("would fail at most %d", *g.MaxWouldFail))
		}
		if g.MaxNewlyFailing != nil {
			bounds = append(bounds, fmt.Sprintf("newly failing at most %d", *g.MaxNewlyFailing))
		}
		if g.Parity != nil {
			bounds = append(bounds, fmt.Sprintf("each wave's clusters differ in at most %d (parity)", g.Parity.MaxDiffering))
		}
		tableRow(w, "Gate:", strings.Join(bounds, ", ")+" (spec.rollout.previewGate: the waves wait for it)")
	}
	if r.Revision == "" {
		tableRow(w, "Started:", fmt.Sprintf("not yet: the hub has not started the preview (status.observedGeneration %d, generation %d)", r.observed, r.generation))
		return
	}
	if !r.UpToDate {
		tableRow(w, "Note:", fmt.Sprintf("these results are of revision %s: the hub has not started the preview of revision %s yet (status.observedGeneration %d, generation %d)", r.Revision, r.CandidateRevision, r.observed, r.generation))
	}
	tableRow(w, "Shadow:", r.Shadow)
	tableRow(w, "Started:", ago(r.StartedAt, now))
	if r.Complete {
		tableRow(w, "Completed:", fmt.Sprintf("%s (%d of %s reported)", ago(r.CompletedAt, now), r.Reported, clustersText(r.Clusters)))
	} else {
		tableRow(w, "Reported:", fmt.Sprintf("%d of %s reported (not complete: the totals are theirs)", r.Reported, clustersText(r.Clusters)))
	}
	tableRow(w, "Would fail:", itoa(r.WouldFail))
	tableRow(w, "Newly failing:", itoa(r.NewlyFailing))
	tableRow(w, "Resources:", itoa(r.Resources))
	if parity := r.parity(); parity != "" {
		tableRow(w, "Parity:", parity)
	}
	if len(r.PerCluster) > 0 {
		fmt.Fprintln(w)
		tableRow(w, "CLUSTER", "REPORTED", "RESOURCES", "WOULD-FAIL", "NEWLY-FAILING", "DIFFER", "FIRST NEWLY FAILING")
		for _, c := range r.PerCluster {
			if !c.Reported {
				tableRow(w, c.Name, "no", "-", "-", "-", "-", "-")
				continue
			}
			tableRow(w, c.Name, "yes", itoa(c.Resources), itoa(c.WouldFail), itoa(c.NewlyFailing), itoa(c.Differ), namedResources(c.FirstNewlyFailing, c.NewlyFailing))
		}
	}
	if len(r.FirstNewlyFailing) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "First newly failing:")
		tableRow(w, "CLUSTER", "NAMESPACE", "KIND", "NAME")
		for _, res := range r.FirstNewlyFailing {
			tableRow(w, res.Cluster, res.Namespace, res.Kind, res.Name)
		}
		if more := r.NewlyFailing - int64(len(r.FirstNewlyFailing)); more > 0 {
			fmt.Fprintf(w, "(and %d more not named: the status names the first %d)\n", more, policyhubv1.MaxPreviewNamed)
		}
	}
	if len(r.FirstDiffering) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "First judged differently (candidate / running version):")
		tableRow(w, "CLUSTER", "NAMESPACE", "KIND", "NAME", "CANDIDATE", "RUNNING")
		for _, d := range r.FirstDiffering {
			tableRow(w, d.Cluster, d.Namespace, d.Kind, d.Name, string(d.Shadow), string(d.Live))
		}
	}
}

// clustersText is "1 cluster" or "N clusters".
func clustersText(n int32) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}

// namedResources is a cluster's named newly failing resources, with how many more there are.
func namedResources(named []resourceRef, total int64) string {
	parts := make([]string, 0, len(named)+1)
	for _, r := range named {
		parts = append(parts, r.String())
	}
	if more := total - int64(len(named)); more > 0 && len(named) > 0 {
		parts = append(parts, fmt.Sprintf("+%d more", more))
	}
	return strings.Join(parts, ", ")
}

// ago is a time's age, "-" when there is none.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return humanAge(t, now) + " ago"
}

// previewVerdict judges a preview against --max-would-fail (nil: not given): an error wrapping
// errFindings (exit 1) when a complete, up-to-date preview has more would-fail resources, with
// the message to print; a plain error when it cannot be judged yet.
func previewVerdict(r *previewReport, maxWouldFail *int64) (string, error) {
	if maxWouldFail == nil {
		return "", nil
	}
	switch {
	case r.Revision == "" || !r.UpToDate:
		return "", fmt.Errorf("--max-would-fail: the preview of FleetPolicy %s is not started for revision %s yet: add --wait to wait for it", r.FleetPolicy, r.CandidateRevision)
	case !r.Complete:
		return "", fmt.Errorf("--max-would-fail: the preview of FleetPolicy %s is not complete (%d of %d clusters reported): add --wait to wait for it", r.FleetPolicy, r.Reported, r.Clusters)
	case r.WouldFail > *maxWouldFail:
		return fmt.Sprintf("preview gate failed: the candidate (revision %s) of FleetPolicy %s would fail %d resources over %d clusters (%d newly failing), more than --max-would-fail %d",
			r.Revision, r.FleetPolicy, r.WouldFail, r.Clusters, r.NewlyFailing, *maxWouldFail), fmt.Errorf("preview over --max-would-fail: %w", errFindings)
	}
	return "", nil
}
