package pages

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/ui/read"
)

// Declaration is the page of a FleetPolicy, PolicySet or ApplicationPolicy: its conditions and
// totals, a FleetPolicy's preview, its state in each cluster (worst first, a page at a time), its
// rollout's waves with their gates and measured values, and the exceptions to it.
type Declaration struct {
	Kind, Namespace, Name string
	Found                 bool
	// Policy is the Kyverno policy it ships (a FleetPolicy's), or what it ships from (a
	// PolicySet's source revision, an ApplicationPolicy's application).
	Policy, Mode string
	// Engines enforce what it ships: a FleetPolicy's template's engine, a PolicySet's members by
	// engine, an ApplicationPolicy's Kyverno.
	Engines      []policyhubv1.EngineCount
	Conditions   []metav1.Condition
	Summary      policyhubv1.StatusSummary
	Clusters     []ClusterState
	ClusterPages Pages
	Rollout      *Rollout
	// Preview is a FleetPolicy's preview, when its status has one (nil otherwise).
	Preview    *Preview
	Exceptions []Exception
}

// ClusterState is the declaration in one cluster.
type ClusterState struct {
	policyhubv1.ClusterStatus
	Violations int64
	// PassUnknown: the cluster's Kyverno writes no pass results (--allowedResults).
	PassUnknown bool
}

// Rollout is a rollout's state with each wave's gate beside what was measured.
type Rollout struct {
	Revision, CurrentWave string
	Paused                bool
	Waves                 []Wave
}

// Wave is one wave: its phase and measured values, and its gate.
type Wave struct {
	policyhubv1.WaveStatus
	Gate policyhubv1.RolloutGate
}

// Preview is what a FleetPolicy's preview (status.preview) learned: where its candidate is, the
// totals over the clusters that reported, each cluster's part (from the page's per-cluster
// states: most newly failing first, a page at a time, as the clusters' table) and the first
// resources the status names.
type Preview struct {
	policyhubv1.PreviewStatus
	// Candidate says where the candidate is (one of the Candidate... texts); CandidatePolicy is
	// the Kyverno policy it is, kind and name.
	Candidate, CandidatePolicy string
	// Gate lists the bounds of the rollout's preview gate, when the rollout previews.
	Gate []string
	// Compared: some resource was compared with the running version (same, differ, only
	// candidate or only running is not 0).
	Compared bool
	// NotNamed counts the newly failing resources the status does not name.
	NotNamed int64
	// PerCluster are the clusters with a preview entry, this page of them.
	PerCluster      []PreviewCluster
	PerClusterPages Pages
}

// PreviewCluster is a preview in one cluster. The counts are 0 until the cluster reported.
type PreviewCluster struct {
	Name     string
	Reported bool
	// Differing counts the resources the candidate and the running version do not judge alike
	// (differ, only candidate, only running).
	Resources, WouldFail, NewlyFailing, Differing int64
	// FirstNewlyFailing names the first of them (at most 3); MoreNewlyFailing counts the others
	// (0 when none is named: the count says it).
	FirstNewlyFailing []policyhubv1.ResourceRef
	MoreNewlyFailing  int64
}

// Where a preview's candidate is, as the hub decides it.
const (
	CandidatePreviewTemplate = "spec.preview.template, beside spec.template (which keeps running)"
	CandidateHeldBack        = "spec.template, held back: nothing but its shadow ships until spec.preview is removed"
	CandidateRolloutGate     = "spec.template, a new version previewed before the rollout's first wave (spec.rollout.previewGate)"
	CandidateGone            = "no longer asked for (neither spec.preview nor spec.rollout.previewGate): the last results the hub wrote"
)

// PreviewPageParam is the URL's query parameter for the page of a preview's clusters.
const PreviewPageParam = "ppage"

// Exception is an exception to the declaration (or to a member of the set).
type Exception struct {
	Namespace, Name, State, Member, Owner, Ticket, Reason string
	// Policy is the Kyverno policy the exception is rendered against (its status).
	Policy    string
	InForce   int32
	Exempted  int64
	ExpiresAt time.Time
}

// BuildDeclaration computes the page of the declaration kind/namespace/name, showing the given
// page of its clusters and, for a FleetPolicy's preview, previewPage of the preview's clusters
// (both from 0).
func BuildDeclaration(s *read.Snapshot, kind, namespace, name string, page, previewPage int) *Declaration {
	d := &Declaration{Kind: kind, Namespace: namespace, Name: name}
	var rollout *policyhubv1.Rollout
	var rolloutStatus *policyhubv1.RolloutStatus
	var preview *policyhubv1.FleetPolicy
	switch kind {
	case policyhubv1.KindFleetPolicy:
		for i := range s.FleetPolicies {
			if fp := &s.FleetPolicies[i]; fp.Name == name {
				d.Found, d.Conditions, d.Summary = true, fp.Status.Conditions, fp.Status.Summary
				t := fp.Spec.Template
				d.Policy = t.Kind + " " + policyhubv1.PolicyRef(t.Metadata.Namespace, cmp.Or(t.Metadata.Name, fp.Name))
				d.Mode = modeOf(fp.Spec.Mode)
				if e, ok := policyhubv1.EngineOfAPIVersion(t.APIVersion); ok {
					d.Engines = []policyhubv1.EngineCount{{Engine: e, Count: 1}}
				}
				rollout, rolloutStatus = fp.Spec.Rollout, fp.Status.Rollout
				if fp.Status.Preview != nil {
					preview = fp
				}
			}
		}
	case policyhubv1.KindPolicySet:
		for i := range s.PolicySets {
			if ps := &s.PolicySets[i]; ps.Name == name {
				d.Found, d.Conditions, d.Summary = true, ps.Status.Conditions, ps.Status.Summary
				if src := ps.Status.Source; src != nil {
					d.Policy = src.Revision
				}
				d.Mode = modeOf(ps.Spec.Mode)
				d.Engines = ps.Status.Members.ByEngine
				rollout, rolloutStatus = ps.Spec.Rollout, ps.Status.Rollout
			}
		}
	case policyhubv1.KindApplicationPolicy:
		for i := range s.ApplicationPolicies {
			if ap := &s.ApplicationPolicies[i]; ap.Namespace == namespace && ap.Name == name {
				d.Found, d.Conditions, d.Summary = true, ap.Status.Conditions, ap.Status.Summary
				d.Policy = ap.Spec.Application
				d.Engines = []policyhubv1.EngineCount{{Engine: policyhubv1.EngineKyverno, Count: 1}}
			}
		}
	}
	if !d.Found {
		return d
	}
	d.Rollout = rolloutOf(rollout, rolloutStatus)

	passUnknown := map[string]bool{}
	for i := range s.Summaries {
		if sum := &s.Summaries[i]; !sum.Spec.Engine.ReportsResult("pass") {
			passUnknown[sum.Namespace] = true
		}
	}
	var clusters []ClusterState
	for i := range s.Slices {
		sl := &s.Slices[i]
		if sl.Declaration.Kind != kind || sl.Declaration.Name != name ||
			(kind == policyhubv1.KindApplicationPolicy && sl.Namespace != namespace) {
			continue
		}
		for _, c := range sl.Clusters {
			cs := ClusterState{ClusterStatus: c, PassUnknown: passUnknown[c.Name]}
			if c.Results != nil {
				cs.Violations = aggregate.AddCount(c.Results.Fail, c.Results.Error)
			}
			cs.Plan = nil // the dry-run plan is for the CLI (kubectl policyhub sync --dry-run)
			clusters = append(clusters, cs)
		}
	}
	slices.SortFunc(clusters, func(a, b ClusterState) int {
		return cmp.Or(cmp.Compare(PhaseRank(b.Phase), PhaseRank(a.Phase)), cmp.Compare(b.Violations, a.Violations),
			compareBool(b.Stale, a.Stale), strings.Compare(a.Name, b.Name))
	})
	// Each pager keeps the other table's page (a page without a preview has none).
	var rows []PreviewCluster
	if preview != nil {
		rows = previewClusters(clusters)
		previewPage = pageIndex(len(rows), previewPage)
	} else {
		previewPage = 0
	}
	page = pageIndex(len(clusters), page)
	d.ClusterPages = paginate(len(clusters), page, func(p int) string {
		u := DeclarationURL(kind, namespace, name) + "?page=" + strconv.Itoa(p+1)
		if previewPage > 0 {
			u += "&" + PreviewPageParam + "=" + strconv.Itoa(previewPage+1)
		}
		return u
	})
	if d.ClusterPages.Total > 0 {
		d.Clusters = clusters[d.ClusterPages.From-1 : d.ClusterPages.To]
	}
	if preview != nil {
		d.Preview = previewOf(preview)
		d.Preview.PerClusterPages = paginate(len(rows), previewPage, func(p int) string {
			u := DeclarationURL(kind, namespace, name) + "?"
			if page > 0 {
				u += "page=" + strconv.Itoa(page+1) + "&"
			}
			return u + PreviewPageParam + "=" + strconv.Itoa(p+1) + "#preview-clusters"
		})
		if d.Preview.PerClusterPages.Total > 0 {
			d.Preview.PerCluster = rows[d.Preview.PerClusterPages.From-1 : d.Preview.PerClusterPages.To]
		}
	}

	if kind != policyhubv1.KindApplicationPolicy {
		for i := range s.Exceptions {
			ex := &s.Exceptions[i]
			if ex.Spec.Target.Kind != kind || ex.Spec.Target.Name != name {
				continue
			}
			e := exceptionOf(ex)
			d.Exceptions = append(d.Exceptions, e)
		}
		slices.SortFunc(d.Exceptions, func(a, b Exception) int {
			return cmp.Or(compareBool(b.State == policyhubv1.ExceptionActive, a.State == policyhubv1.ExceptionActive),
				strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
	}
	return d
}

// previewOf is fp's preview (fp.Status.Preview is set) without its clusters: where the candidate
// is, as the hub decides it (spec.preview's template; else spec.template, held back by
// spec.preview or previewed by the rollout's gate), and the totals.
func previewOf(fp *policyhubv1.FleetPolicy) *Preview {
	p := &Preview{PreviewStatus: *fp.Status.Preview}
	tmpl := &fp.Spec.Template
	switch {
	case fp.Spec.Preview != nil && fp.Spec.Preview.Template != nil:
		tmpl, p.Candidate = fp.Spec.Preview.Template, CandidatePreviewTemplate
	case fp.Spec.Preview != nil:
		p.Candidate = CandidateHeldBack
	case fp.Spec.Rollout != nil && fp.Spec.Rollout.PreviewGate != nil:
		p.Candidate = CandidateRolloutGate
		p.Gate = gateBounds(fp.Spec.Rollout.PreviewGate)
	default:
		p.Candidate = CandidateGone
	}
	p.CandidatePolicy = tmpl.Kind + " " + policyhubv1.PolicyRef(tmpl.Metadata.Namespace, cmp.Or(tmpl.Metadata.Name, fp.Name))
	p.Compared = p.Same != 0 || p.Differ != 0 || p.OnlyShadow != 0 || p.OnlyLive != 0
	p.NotNamed = max(0, p.NewlyFailing-int64(len(p.FirstNewlyFailing)))
	return p
}

// gateBounds are a preview gate's bounds, as sentences' parts.
func gateBounds(g *policyhubv1.PreviewGate) []string {
	var bounds []string
	if g.MaxWouldFail != nil {
		bounds = append(bounds, "would fail at most "+strconv.FormatInt(*g.MaxWouldFail, 10))
	}
	if g.MaxNewlyFailing != nil {
		bounds = append(bounds, "newly failing at most "+strconv.FormatInt(*g.MaxNewlyFailing, 10))
	}
	if g.Parity != nil {
		bounds = append(bounds, "parity: each wave's clusters judged differently in at most "+strconv.FormatInt(g.Parity.MaxDiffering, 10)+" resources")
	}
	return bounds
}

// previewClusters are the clusters with a preview entry, most newly failing first (then would
// fail, differing, name). A cluster that has not reported counts nothing yet.
func previewClusters(clusters []ClusterState) []PreviewCluster {
	var rows []PreviewCluster
	for i := range clusters {
		c := clusters[i].Preview
		if c == nil {
			continue
		}
		row := PreviewCluster{Name: clusters[i].Name, Reported: c.Reported}
		if c.Reported {
			row.Resources, row.WouldFail, row.NewlyFailing, row.Differing = c.Resources, c.WouldFail, c.NewlyFailing, c.Differing()
			row.FirstNewlyFailing = c.FirstNewlyFailing[:min(len(c.FirstNewlyFailing), policyhubv1.MaxClusterPreviewNamed)]
			if len(row.FirstNewlyFailing) > 0 {
				row.MoreNewlyFailing = max(0, c.NewlyFailing-int64(len(row.FirstNewlyFailing)))
			}
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b PreviewCluster) int {
		return cmp.Or(cmp.Compare(b.NewlyFailing, a.NewlyFailing), cmp.Compare(b.WouldFail, a.WouldFail),
			cmp.Compare(b.Differing, a.Differing), strings.Compare(a.Name, b.Name))
	})
	return rows
}

func rolloutOf(spec *policyhubv1.Rollout, status *policyhubv1.RolloutStatus) *Rollout {
	if spec == nil {
		return nil
	}
	r := &Rollout{Paused: spec.Paused}
	measured := map[string]policyhubv1.WaveStatus{}
	if status != nil {
		r.Revision, r.CurrentWave = status.Revision, status.CurrentWave
		for _, w := range status.Waves {
			measured[w.Name] = w
		}
	}
	for _, w := range spec.Waves {
		ws, ok := measured[w.Name]
		if !ok {
			ws = policyhubv1.WaveStatus{Name: w.Name, Phase: policyhubv1.WavePending}
		}
		r.Waves = append(r.Waves, Wave{WaveStatus: ws, Gate: w.Gate})
	}
	return r
}

// modeOf is a declaration's mode as set ("" keeps the policy's own failure action).
func modeOf(m *policyhubv1.Mode) string {
	if m == nil {
		return ""
	}
	return string(*m)
}

func exceptionOf(ex *policyhubv1.FleetPolicyException) Exception {
	e := Exception{Namespace: ex.Namespace, Name: ex.Name, State: ex.Status.State, Policy: ex.Status.Policy, Owner: ex.Spec.Owner, Ticket: ex.Spec.Ticket,
		Reason: ex.Spec.Reason, InForce: ex.Status.InForce, Exempted: ex.Status.Exempted, ExpiresAt: ex.Spec.ExpiresAt.Time}
	if m := ex.Spec.Target.Member; m != nil {
		e.Member = m.Kind + " " + policyhubv1.PolicyRef(m.Namespace, m.Name)
	}
	return e
}
