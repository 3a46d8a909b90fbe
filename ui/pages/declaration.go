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
// totals, its state in each cluster (worst first, a page at a time), its rollout's waves with
// their gates and measured values, and the exceptions to it.
type Declaration struct {
	Kind, Namespace, Name string
	Found                 bool
	// Policy is the Kyverno policy it ships (a FleetPolicy's), or what it ships from (a
	// PolicySet's source revision, an ApplicationPolicy's application).
	Policy, Mode string
	Conditions   []metav1.Condition
	Summary      policyhubv1.StatusSummary
	Clusters     []ClusterState
	ClusterPages Pages
	Rollout      *Rollout
	Exceptions   []Exception
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
// page of its clusters.
func BuildDeclaration(s *read.Snapshot, kind, namespace, name string, page int) *Declaration {
	d := &Declaration{Kind: kind, Namespace: namespace, Name: name}
	var rollout *policyhubv1.Rollout
	var rolloutStatus *policyhubv1.RolloutStatus
	switch kind {
	case policyhubv1.KindFleetPolicy:
		for i := range s.FleetPolicies {
			if fp := &s.FleetPolicies[i]; fp.Name == name {
				d.Found, d.Conditions, d.Summary = true, fp.Status.Conditions, fp.Status.Summary
				t := fp.Spec.Template
				d.Policy = t.Kind + " " + policyhubv1.PolicyRef(t.Metadata.Namespace, cmp.Or(t.Metadata.Name, fp.Name))
				d.Mode = modeOf(fp.Spec.Mode)
				rollout, rolloutStatus = fp.Spec.Rollout, fp.Status.Rollout
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
				rollout, rolloutStatus = ps.Spec.Rollout, ps.Status.Rollout
			}
		}
	case policyhubv1.KindApplicationPolicy:
		for i := range s.ApplicationPolicies {
			if ap := &s.ApplicationPolicies[i]; ap.Namespace == namespace && ap.Name == name {
				d.Found, d.Conditions, d.Summary = true, ap.Status.Conditions, ap.Status.Summary
				d.Policy = ap.Spec.Application
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
	d.ClusterPages = paginate(len(clusters), page, func(p int) string {
		return DeclarationURL(kind, namespace, name) + "?page=" + strconv.Itoa(p+1)
	})
	if d.ClusterPages.Total > 0 {
		d.Clusters = clusters[d.ClusterPages.From-1 : d.ClusterPages.To]
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
