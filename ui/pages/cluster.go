package pages

import (
	"cmp"
	"slices"
	"strings"
	"time"

	policyhubv1 "github.com/policyhub/policyhub/apis/policyhub/v1alpha1"
	"github.com/policyhub/policyhub/hub/aggregate"
	"github.com/policyhub/policyhub/ui/read"
)

// Cluster is a cluster's page: its labels and agent, its policies' results, the declarations'
// state there, its namespaces and applications, and its top violations with the resource, rule
// and Kyverno's message.
type Cluster struct {
	Name      string
	Inventory bool // the cluster is in the hub's inventory
	Labels    map[string]string
	Reported  bool
	Stale     bool
	Age       time.Duration
	Engine    policyhubv1.EngineInfo
	Totals    policyhubv1.ResultCounts
	Blocked   int64
	// PassUnknown: the cluster's Kyverno writes no pass results (--allowedResults): pass counts
	// are shown as unknown, never as 0.
	PassUnknown bool
	// Legacy is the cluster's Kyverno engine facts and legacy objects (see Inventory).
	Legacy InventoryCluster
	// Policies are the cluster's policies of every engine, worst first.
	Policies     []ClusterPolicy
	Declarations []ClusterDeclaration
	Namespaces   []NamespaceResults
	Applications []ApplicationResults
	Violations   []policyhubv1.Violation
	Truncated    policyhubv1.Truncation
	// NamespacesDerived: the agent does not count namespaces (an older one); Namespaces are
	// summed from its applications and namespaced policies.
	NamespacesDerived bool
}

// ClusterPolicy is one policy's results in the cluster, of any engine.
type ClusterPolicy struct {
	policyhubv1.PolicySummary
	Violations  int64
	Declaration string
	// EngineName is the engine enforcing it; PassKnown and SkipKnown whether that engine counts
	// those results in the cluster (Gatekeeper's audit counts violations only).
	EngineName           policyhubv1.PolicyEngine
	PassKnown, SkipKnown bool
}

// ClusterDeclaration is a declaration's state in the cluster.
type ClusterDeclaration struct {
	Kind, Namespace, Name, URL string
	policyhubv1.ClusterStatus
}

// NamespaceResults are a namespace's results: as the agent counts them (spec.namespaces), or,
// from an agent that does not, summed over its applications' and namespaced policies' results.
type NamespaceResults struct {
	Namespace    string
	Results      policyhubv1.ResultCounts
	Violations   int64
	Blocked      int64
	Applications int
}

// ApplicationResults are an application's results for one policy in the cluster.
type ApplicationResults struct {
	policyhubv1.ApplicationSummary
	Violations int64
	URL        string
}

// BuildCluster computes the page of cluster name; full is its whole summary (nil when it has
// none), which alone has the violations.
func BuildCluster(s *read.Snapshot, name string, full *policyhubv1.PolicyReportSummary) *Cluster {
	c := &Cluster{Name: name}
	c.Labels, c.Inventory = s.Clusters[name]
	declarations := declarationsByPolicy(s)
	if full != nil {
		c.Reported = true
		c.Stale = aggregate.JudgedStale(full)
		if at, _ := aggregate.ObservedAt(full, s.Now); !at.IsZero() {
			c.Age = s.Now.Sub(at)
		}
		c.Engine, c.Totals, c.Blocked = full.Spec.Engine, full.Spec.Totals, full.Spec.Blocked
		c.PassUnknown = !full.Spec.Engine.ReportsResult("pass")
		if full.Spec.Truncated != nil {
			c.Truncated = *full.Spec.Truncated
		}
		namespaces := map[string]*NamespaceResults{}
		inNamespace := func(ns string) *NamespaceResults {
			n := namespaces[ns]
			if n == nil {
				n = &NamespaceResults{Namespace: ns}
				namespaces[ns] = n
			}
			return n
		}
		c.NamespacesDerived = len(full.Spec.Namespaces) == 0
		for _, n := range full.Spec.Namespaces {
			ns := inNamespace(n.Namespace)
			ns.Results, ns.Blocked = n.Results, n.Blocked
		}
		for _, p := range full.Spec.Policies {
			engine := policyhubv1.EngineOrKyverno(p.Engine)
			cp := ClusterPolicy{PolicySummary: p, Violations: aggregate.AddCount(p.Results.Fail, p.Results.Error), EngineName: engine,
				PassKnown: engine.ReportsResult(&full.Spec.Engine, "pass"), SkipKnown: engine.ReportsResult(&full.Spec.Engine, "skip")}
			cp.Declaration = cmp.Or(declarations[policyKey{p.Kind, p.Namespace, p.Name}], declarations[policyKey{"", p.Namespace, p.Name}])
			c.Policies = append(c.Policies, cp)
			if p.Namespace != "" && c.NamespacesDerived {
				aggregate.Add(&inNamespace(p.Namespace).Results, p.Results)
			}
		}
		slices.SortFunc(c.Policies, func(a, b ClusterPolicy) int {
			return cmp.Or(cmp.Compare(b.Violations, a.Violations), cmp.Compare(b.Blocked, a.Blocked), strings.Compare(a.Name, b.Name))
		})
		for _, a := range full.Spec.Applications {
			c.Applications = append(c.Applications, ApplicationResults{ApplicationSummary: a,
				Violations: aggregate.AddCount(a.Results.Fail, a.Results.Error), URL: ApplicationURL(a.Namespace, a.Name)})
			n := inNamespace(a.Namespace)
			if c.NamespacesDerived {
				aggregate.Add(&n.Results, a.Results)
			}
			n.Applications++
		}
		slices.SortFunc(c.Applications, func(a, b ApplicationResults) int {
			return cmp.Or(cmp.Compare(b.Violations, a.Violations), strings.Compare(a.Namespace, b.Namespace),
				strings.Compare(a.Name, b.Name), strings.Compare(a.Policy, b.Policy))
		})
		for _, n := range namespaces {
			n.Violations = aggregate.AddCount(n.Results.Fail, n.Results.Error)
			c.Namespaces = append(c.Namespaces, *n)
		}
		slices.SortFunc(c.Namespaces, func(a, b NamespaceResults) int {
			return cmp.Or(cmp.Compare(b.Violations, a.Violations), strings.Compare(a.Namespace, b.Namespace))
		})
		c.Violations = slices.Clone(full.Spec.Violations)
		slices.SortStableFunc(c.Violations, func(a, b policyhubv1.Violation) int {
			return cmp.Compare(policyhubv1.SeverityRank(a.Severity), policyhubv1.SeverityRank(b.Severity))
		})
	}
	c.Legacy = InventoryOf(name, full, func(*policyhubv1.PolicyReportSummary) bool { return c.Stale })
	for i := range s.Slices {
		sl := &s.Slices[i]
		for _, st := range sl.Clusters {
			if st.Name != name {
				continue
			}
			ns := ""
			if sl.Declaration.Kind == policyhubv1.KindApplicationPolicy {
				ns = sl.Namespace
			}
			st.Plan = nil
			c.Declarations = append(c.Declarations, ClusterDeclaration{Kind: sl.Declaration.Kind, Namespace: ns, Name: sl.Declaration.Name,
				URL: DeclarationURL(sl.Declaration.Kind, ns, sl.Declaration.Name), ClusterStatus: st})
		}
	}
	slices.SortFunc(c.Declarations, func(a, b ClusterDeclaration) int {
		return cmp.Or(cmp.Compare(PhaseRank(b.Phase), PhaseRank(a.Phase)), strings.Compare(a.Kind, b.Kind),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return c
}
